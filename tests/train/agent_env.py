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
            messages.append({"role": "assistant", "content": answer})
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
