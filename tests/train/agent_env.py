"""A tiny agent program the training tests run as an env: the plain ``openai`` SDK against the proxy.

Its main loop asks the model twice, feeding each reply back. With ``sub=True`` a
sub-agent asks once in between, with a history of its own, so the rollout's
calls form the sequences 0, 1, 0.
"""

from __future__ import annotations

from typing import Any

import openai

from benchmax.agents import AgentEnv
from benchmax.envs import ListDataset, completion_text

SUB_PROMPT = "summarise four"


async def two_turn_agent(example: dict[str, Any], base_url: str, api_key: str) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    messages: list[dict[str, Any]] = list(example["prompt_messages"])
    answer = ""
    try:
        for turn in range(2):
            reply = await client.chat.completions.create(model="policy", messages=messages)
            answer = reply.choices[0].message.content or ""
            # the reply as the SDK parsed it (tool calls included): the next call continues it
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            if turn == 0 and example.get("sub"):
                sub = await client.chat.completions.create(
                    model="policy", messages=[{"role": "user", "content": SUB_PROMPT}]
                )
                messages.append({"role": "user", "content": f"again {sub.choices[0].message.content or ''}"[:40]})
            else:
                messages.append({"role": "user", "content": "again"})
    finally:
        await client.close()
    return answer


class TinyAgentEnv(AgentEnv):
    """Rewards a short final answer, so rollouts of a group differ and have advantages."""

    agent = staticmethod(two_turn_agent)
    max_calls = 6

    def __init__(self, *, sub: bool = False) -> None:
        super().__init__()
        self.sub = sub

    async def create_dataset(self, split: Any, base_dir: Any, *, max_examples: int | None = None) -> ListDataset:
        rows = [
            {"prompt_messages": [{"role": "user", "content": f"what is two plus {word}"}], "sub": self.sub}
            for word in ("three", "five")
        ]
        return ListDataset(rows)

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        return {"short": 1.0 / (1 + len(completion_text(rollout.messages).split()))}


def agent_bridge(policy: Any, tokenizer: Any, *, sub: bool = True, group_size: int = 2) -> tuple[Any, list[str], Any]:
    """A ``RolloutBridge`` whose engine runs :class:`TinyAgentEnv` against ``policy``, one batch of
    prompts (every example ``group_size`` times) and the env (to close)."""
    import asyncio
    from pathlib import Path

    from benchmax.engine import Engine
    from benchmax.envs import SamplingParams
    from benchmax.train import POLICY_URL
    from benchmax.train._rollouts import RolloutBridge

    env = TinyAgentEnv(sub=sub)
    engine = Engine(env)
    engine.clients.register(POLICY_URL, policy)
    dataset = asyncio.run(env.create_dataset("train", Path(".")))
    bridge = RolloutBridge(
        engine=engine,
        examples={example.id: example for example in dataset},
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=1.0, max_tokens=6),
        policy=policy,
    )
    return bridge, [example.id for example in dataset for _ in range(group_size)], env


def check_sequences_as_served(bridge: Any, output: dict[str, Any], tokenizer: Any) -> None:
    """Each rollout of ``bridge.last`` went to TRL as its first sequence, its further ones are in
    ``extra``: every one exactly the ids its calls were served, the sub-agent's rendered fresh."""
    from benchmax.train._tokens import render_prompt

    batch = bridge.last
    fresh = render_prompt(tokenizer, [{"role": "user", "content": SUB_PROMPT}], None)
    assert batch.outcomes and [check.status for check in batch.checks] == ["ok"] * len(batch.outcomes)
    for index, outcome in enumerate(batch.outcomes):
        assert outcome.termination_reason == "finished", outcome.error
        assert [turn.sequence for turn in outcome.turns] == [0, 1, 0], (outcome.turns, outcome.messages)
        main, sub_call = [outcome.turns[0], outcome.turns[2]], outcome.turns[1]
        assert list(sub_call.prompt_token_ids or ()) == fresh
        stream = list(main[0].prompt_token_ids or ()) + list(main[0].completion_token_ids or ())
        assert list(main[1].prompt_token_ids or ())[: len(stream)] == stream
        last = list(main[1].prompt_token_ids or ()) + list(main[1].completion_token_ids or ())
        assert output["prompt_ids"][index] + output["completion_ids"][index] == last
        (extra,) = batch.extra[index]
        assert list(extra.prompt_ids) == fresh
        assert list(extra.completion_ids) == list(sub_call.completion_token_ids or ())
        assert list(extra.logprobs) == list(sub_call.completion_logprobs or ())
