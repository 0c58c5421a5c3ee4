"""The importance weights async generation trains with: TRL's vLLM correction, mode by mode."""

from __future__ import annotations

import math

import pytest
import torch

from benchmax.train._grpo import importance_weights, shared_prefix, shared_prefix_logps
from benchmax.train._trl import freeze_below


def test_token_truncate_caps_each_tokens_ratio_and_ignores_masked_and_unknown_tokens():
    log_ratio = torch.tensor([[math.log(0.5), math.log(4.0), float("nan"), 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    weights = importance_weights(log_ratio, mask, mode="token_truncate", cap=3.0)
    assert torch.allclose(weights, torch.tensor([[0.5, 3.0, 1.0, 1.0]]))


def test_sequence_modes_use_one_ratio_per_sequence_and_mask_modes_zero_what_is_out_of_bounds():
    log_ratio = torch.tensor([[math.log(2.0), math.log(2.0)], [math.log(0.5), 0.0]])
    mask = torch.ones_like(log_ratio)
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="sequence_truncate", cap=3.0), torch.tensor([[3.0], [0.5]])
    )
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="sequence_mask", cap=3.0, floor=0.6), torch.tensor([[0.0], [0.0]])
    )
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="token_mask", cap=3.0, floor=0.6),
        torch.tensor([[2.0, 2.0], [0.0, 1.0]]),
    )
    with pytest.raises(ValueError, match="token_truncate"):
        importance_weights(log_ratio, mask, mode="token", cap=3.0)


def test_weighing_the_advantages_is_trls_weighing_of_the_clipped_loss():
    torch.manual_seed(0)
    logps = torch.randn(3, 5, requires_grad=True)
    old = logps.detach() + 0.1 * torch.randn(3, 5)
    advantages = torch.randn(3, 1)
    weights = importance_weights(0.3 * torch.randn(3, 5), torch.ones(3, 5), mode="token_truncate", cap=3.0)

    def clipped(adv):
        ratio = torch.exp(logps - old)
        return -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)

    assert torch.allclose(clipped(advantages) * weights, clipped(advantages * weights))


def test_train_layers_leaves_only_the_top_layers_and_the_final_norm_trainable(tiny):
    model, _ = tiny
    freeze_below(model, 1)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    last = len(model.model.layers) - 1
    assert trainable and all(name.startswith((f"model.layers.{last}.", "model.norm.")) for name in trainable)
    assert "model.norm.weight" in trainable


def _trl_layout(tokenizer, prompts, completions):
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


def test_the_shared_prefix_pass_gives_trls_logprobs_entropies_and_gradients(tiny):
    from trl.trainer.utils import add_fused_lm_head

    model, tokenizer = tiny
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    words = tokenizer("<|im_start|>user\nwhat is two plus three five seven two<|im_end|>", add_special_tokens=False)
    shared = words["input_ids"] * 3  # a long common prefix
    prompts = [[*shared, 5, 6], [*shared, 7], [*shared, 5, 6, 8, 9]]
    completions = [[10, 11, 12], [13], [14, 15]]
    input_ids, mask, keep = _trl_layout(tokenizer, prompts, completions)
    assert shared_prefix(input_ids, mask, input_ids.size(1) - keep) == len(shared)

    def trl_pass():
        labels = input_ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        out = model(input_ids=input_ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        return out.log_probs[:, -keep:], out.entropy[:, -keep:]

    completion_mask = mask[:, -keep:].float()
    expected, expected_entropy = trl_pass()
    (expected * completion_mask).sum().backward()
    expected_grads = [parameter.grad.clone() for parameter in model.parameters()]
    model.zero_grad()
    got, entropy, _ = shared_prefix_logps(model, input_ids, mask, keep, compute_entropy=True, min_shared=4)
    (got * completion_mask).sum().backward()
    assert torch.allclose(got * completion_mask, expected * completion_mask, atol=1e-5)
    assert torch.allclose(entropy * completion_mask, expected_entropy * completion_mask, atol=1e-5)
    for parameter, grad in zip(model.parameters(), expected_grads, strict=True):
        assert torch.allclose(parameter.grad, grad, atol=1e-5)
    assert shared_prefix_logps(model, input_ids, mask, keep, min_shared=len(shared) + 1) is None
