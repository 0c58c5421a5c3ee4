"""The in-process policy: batched generation, exact token ids, faithful logprobs."""

from __future__ import annotations

import asyncio
import copy

import torch
from calculator_env import calculator_bridge

from benchmax.train._policy import InProcessPolicy
from benchmax.train._sampling import GenerationRequest, sample
from benchmax.train._tokens import render_prompt


def _bridge(model, tokenizer, bias, **policy_kwargs):
    policy = InProcessPolicy(model, tokenizer, record=True, generate_kwargs={"sequence_bias": bias}, **policy_kwargs)
    bridge, prompts = calculator_bridge(policy, tokenizer)
    return bridge, policy, prompts


def test_multi_turn_ids_sent_to_the_trainer_are_exactly_those_generated(tiny, tool_bias):
    model, tokenizer = tiny
    torch.manual_seed(1)
    bridge, policy, prompts = _bridge(model, tokenizer, tool_bias)
    try:
        output = bridge.generate(prompts, group_size=4, step=0)
    finally:
        bridge.loop.run(bridge.engine.aclose())
        bridge.loop.close()
        policy.close()
    generated = {(record.prompt_ids, record.completion_ids) for record in policy.records}
    batch = bridge.last
    multi_turn = [outcome for outcome in batch.outcomes if len(outcome.turns) > 1]
    assert len(multi_turn) >= 3, "the biased random policy should call tools in several rollouts"
    rerendered_differs = 0
    for index, outcome in enumerate(batch.outcomes):
        prompt_ids = output["prompt_ids"][index]
        completion_ids = output["completion_ids"][index]
        mask = output["env_mask"][index]
        # every turn is one generate call, as the model saw and produced it
        for turn in outcome.turns:
            assert (turn.prompt_token_ids, turn.completion_token_ids) in generated
        # the trainer's stream is the last turn's input plus its output, nothing re-rendered
        last = outcome.turns[-1]
        assert prompt_ids + completion_ids == list(last.prompt_token_ids) + list(last.completion_token_ids)
        # env_mask marks exactly the generated tokens
        kept = [token for token, bit in zip(completion_ids, mask, strict=True) if bit]
        assert kept == [token for turn in outcome.turns for token in turn.completion_token_ids]
        assert len(output["logprobs"][index]) == len(completion_ids)
        if len(outcome.turns) > 1:
            assert 0 in mask
            rerendered = render_prompt(tokenizer, outcome.messages[:-1], None)
            rerendered_differs += rerendered != list(last.prompt_token_ids)
    # the template drops generated tool-call text from history: re-rendering would lie
    assert rerendered_differs == len(multi_turn)


def test_concurrent_rollouts_share_padded_generate_calls(tiny, tool_bias):
    model, tokenizer = tiny
    torch.manual_seed(2)
    bridge, policy, prompts = _bridge(model, tokenizer, tool_bias)
    try:
        bridge.generate(prompts, group_size=4, step=0)
    finally:
        bridge.loop.run(bridge.engine.aclose())
        bridge.loop.close()
        policy.close()
    turns = sum(len(outcome.turns) for outcome in bridge.last.outcomes)
    assert turns >= len(prompts)
    assert policy.generate_calls <= 4 < turns


def test_returned_logprobs_are_the_policys_own(tiny):
    model, tokenizer = tiny
    torch.manual_seed(3)
    policy = InProcessPolicy(model, tokenizer)
    body = {"messages": [{"role": "user", "content": "what is two plus three"}], "temperature": 0.7, "max_tokens": 6}

    async def one():
        try:
            return await policy.chat(body, rollout_id="r")
        finally:
            await policy.aclose()

    result = asyncio.run(one())
    policy.close()
    ids = torch.tensor([list(result.prompt_token_ids) + list(result.completion_token_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(result.prompt_token_ids) - 1 : -1] / 0.7
    expected = torch.log_softmax(logits, -1).gather(-1, ids[0, len(result.prompt_token_ids) :, None])[:, 0]
    assert torch.allclose(torch.tensor(result.completion_logprobs), expected, atol=1e-4)
    assert result.usage.completion_tokens == len(result.completion_token_ids)


def _prompts(tokenizer):
    text = "<|im_start|>user\nwhat is two plus three<|im_end|>\n<|im_start|>assistant\n"
    base = tokenizer(text, add_special_tokens=False)["input_ids"]
    extra = tokenizer("five", add_special_tokens=False)["input_ids"]
    # siblings share a whole prompt, every prompt shares a prefix, one is shorter
    return [base, base, base[:3] + extra + base[3:], base[:-2], base]


def test_shared_prefix_sampling_is_greedy_generate_token_for_token(tiny):
    model, tokenizer = tiny
    model.eval()
    prompts = _prompts(tokenizer)
    requests = [GenerationRequest(list(prompt), 6, 0.0, 1.0) for prompt in prompts]
    generations = sample(model, requests, eos_ids=[tokenizer.eos_token_id])
    for prompt, generation in zip(prompts, generations, strict=True):
        reference = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=6,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )[0, len(prompt) :].tolist()
        assert list(generation.ids) == reference[: len(generation.ids)]
        assert len(generation.ids) == 6 or generation.finished


def test_shared_prefix_sampling_returns_the_logprobs_a_full_forward_pass_gives(tiny):
    model, tokenizer = tiny
    model.eval()
    torch.manual_seed(5)
    prompts = _prompts(tokenizer)
    limits = [8, 3, 8, 5, 8]
    requests = [
        GenerationRequest(list(prompt), limit, 0.8, 0.9) for prompt, limit in zip(prompts, limits, strict=True)
    ]
    generations = sample(model, requests, eos_ids=[tokenizer.eos_token_id])
    assert [len(generation.ids) <= limit for generation, limit in zip(generations, limits, strict=True)] == [True] * 5
    for prompt, generation in zip(prompts, generations, strict=True):
        ids = torch.tensor([prompt + list(generation.ids)])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1 : -1] / 0.8
        expected = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None])[:, 0]
        assert torch.allclose(torch.tensor(generation.logprobs), expected, atol=1e-4)


def test_staged_weights_reach_the_next_batch_and_every_turn_records_its_version(tiny):
    model, tokenizer = tiny
    trainer_model = copy.deepcopy(model)
    policy = InProcessPolicy(copy.deepcopy(model), tokenizer)
    body = {"messages": [{"role": "user", "content": "what is two plus three"}], "temperature": 0.0, "max_tokens": 4}

    async def turn(rollout_id):
        return await policy.chat(body, rollout_id=rollout_id)

    async def both():
        try:
            first = await turn("a")
            with torch.no_grad():
                for parameter in trainer_model.parameters():
                    parameter.add_(torch.randn_like(parameter))
            policy.stage_weights(trainer_model, 7)
            return first, await turn("b")
        finally:
            await policy.aclose()

    first, second = asyncio.run(both())
    policy.close()
    assert first.policy_version is None
    assert second.policy_version == 7
    assert all(
        torch.equal(a, b) for a, b in zip(policy.model.parameters(), trainer_model.parameters(), strict=True)
    )
    # the trainer's own tensors are not shared: later updates do not leak into the generation copy
    with torch.no_grad():
        next(trainer_model.parameters()).add_(1.0)
    assert not torch.equal(next(policy.model.parameters()), next(trainer_model.parameters()))


def test_staging_copies_into_the_weights_the_last_swap_replaced(tiny):
    """Async generation stages the trainer's weights every step: into memory the
    generation copy already holds (no allocation on the trainer's thread), with
    the same values, so the same tokens are generated as from the trainer's model."""
    model, tokenizer = tiny
    trainer_model = copy.deepcopy(model)
    policy = InProcessPolicy(copy.deepcopy(model), tokenizer)
    original = sorted(parameter.data_ptr() for parameter in policy.model.parameters())
    body = {"messages": [{"role": "user", "content": "what is two plus three"}], "temperature": 0.0, "max_tokens": 6}

    def update() -> None:
        with torch.no_grad():
            for parameter in trainer_model.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))

    async def steps():
        try:
            update()
            policy.stage_weights(trainer_model, 1)  # the first: a copy of its own
            await policy.chat(body, rollout_id="a")  # swapped in; the original weights are kept
            update()
            policy.stage_weights(trainer_model, 2)  # into the original weights
            update()
            policy.stage_weights(trainer_model, 3)  # into the set no batch took yet
            return await policy.chat(body, rollout_id="b")
        finally:
            await policy.aclose()

    result = asyncio.run(steps())
    policy.close()
    assert result.policy_version == 3
    assert sorted(parameter.data_ptr() for parameter in policy.model.parameters()) == original
    assert all(
        torch.equal(a, b) for a, b in zip(policy.model.parameters(), trainer_model.parameters(), strict=True)
    )
    [expected] = sample(trainer_model.eval(), [GenerationRequest(list(result.prompt_token_ids), 6, 0.0, 1.0)],
                        eos_ids=[tokenizer.eos_token_id])  # fmt: skip
    assert result.completion_token_ids == expected.ids
