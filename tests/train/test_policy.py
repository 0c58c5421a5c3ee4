"""The in-process policy: batched generation, exact token ids, faithful logprobs."""

from __future__ import annotations

import asyncio

import torch
from calculator_env import calculator_bridge

from benchmax.train._policy import InProcessPolicy
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
