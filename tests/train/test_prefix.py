"""The loss's forward pass with each distinct prompt run once is TRL's pass, value for value."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from benchmax.train._prefix import common_prefix, prefix_logps


def _trl_layout(tokenizer: Any, prompts: list[list[int]], completions: list[list[int]]) -> tuple[Any, Any, int]:
    """Left-padded prompts then right-padded completions, as TRL lays a batch out."""
    pad = tokenizer.pad_token_id
    width = max(len(prompt) for prompt in prompts)
    length = max(len(completion) for completion in completions)
    ids, mask = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        left = width - len(prompt)
        right = length - len(completion)
        ids.append([pad] * left + prompt + completion + [pad] * right)
        mask.append([0] * left + [1] * (len(prompt) + len(completion)) + [0] * right)
    return torch.tensor(ids), torch.tensor(mask), length


def _words(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _batch(tokenizer: Any, case: str) -> tuple[list[list[int]], list[list[int]]]:
    system = _words(tokenizer, "<|im_start|>system\nwhat is two plus three five seven two<|im_end|>") * 2
    if case == "one long common prefix, every prompt distinct":
        prompts = [[*system, 5, 6], [*system, 7], [*system, 5, 6, 8, 9]]
        return prompts, [[10, 11, 12], [13], [14, 15]]
    if case == "groups of siblings under a system prompt":
        questions = [[5, 6], [7], [5, 6, 8, 9, 10, 11]]
        prompts = [[*system, *question] for question in questions for _ in range(3)]
        completions = [[10 + row, 11, 12][: 1 + row % 3] for row in range(9)]
        return prompts, completions
    if case == "groups with nothing shared between them":
        questions = [_words(tokenizer, "two plus three"), _words(tokenizer, "five seven"), [9, 8, 7, 6, 5, 4, 3]]
        prompts = [question for question in questions for _ in range(4)]
        completions = [[20 + row % 5, 21, 22, 23][: 1 + row % 4] for row in range(12)]
        return prompts, completions
    raise AssertionError(case)


CASES = (
    "one long common prefix, every prompt distinct",
    "groups of siblings under a system prompt",
    "groups with nothing shared between them",
)


@pytest.mark.parametrize("batch_size", [None, 2])
@pytest.mark.parametrize("case", CASES)
def test_the_prefix_pass_gives_trls_logprobs_entropies_and_gradients(tiny, case, batch_size):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    prompts, completions = _batch(tokenizer, case)
    input_ids, mask, keep = _trl_layout(tokenizer, prompts, completions)
    completion_mask = mask[:, -keep:].float()

    labels = input_ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=input_ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    expected, expected_entropy = out.log_probs[:, -keep:], out.entropy[:, -keep:]
    (expected * completion_mask).sum().backward()
    expected_grads = [parameter.grad.clone() for parameter in model.parameters()]
    model.zero_grad()

    result = prefix_logps(model, input_ids, mask, keep, batch_size=batch_size, compute_entropy=True)
    assert result is not None, "the batch shares enough to take the prefix pass"
    got, entropy, _ = result
    (got * completion_mask).sum().backward()
    assert torch.allclose(got * completion_mask, expected * completion_mask, atol=1e-5)
    assert torch.allclose(entropy * completion_mask, expected_entropy * completion_mask, atol=1e-5)
    for parameter, grad in zip(model.parameters(), expected_grads, strict=True):
        assert torch.allclose(parameter.grad, grad, atol=1e-5)


def test_a_batch_of_distinct_prompts_with_nothing_shared_is_left_to_trl(tiny):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    add_fused_lm_head(model, temperature=1.0)
    prompts = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
    input_ids, mask, keep = _trl_layout(tokenizer, prompts, [[20, 21], [22], [23, 24]])
    assert prefix_logps(model, input_ids, mask, keep) is None
    assert prefix_logps(model, input_ids, mask, keep, saving=10.0) is not None


def test_common_prefix_counts_the_leading_tokens_every_row_shares():
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix([[1, 2], [3]]) == 0


def test_a_model_with_activation_checkpointing_is_left_to_trl(tiny):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    add_fused_lm_head(model, temperature=1.0)
    prompts, completions = _batch(tokenizer, "groups of siblings under a system prompt")
    input_ids, mask, keep = _trl_layout(tokenizer, prompts, completions)
    assert prefix_logps(model, input_ids, mask, keep) is not None
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()
    assert prefix_logps(model, input_ids, mask, keep) is None


def test_prompts_that_are_not_left_padded_are_left_to_trl(tiny):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    add_fused_lm_head(model, temperature=1.0)
    prompts, completions = _batch(tokenizer, "groups of siblings under a system prompt")
    input_ids, mask, keep = _trl_layout(tokenizer, prompts, completions)
    holed = mask.clone()
    holed[0, input_ids.size(1) - keep - 3] = 0  # a hole inside the first row's prompt
    assert prefix_logps(model, input_ids, holed, keep) is None
    assert prefix_logps(model, input_ids, mask, keep) is not None
