"""The agent env the tests score with, and the examples they run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.agents import AgentEnv
from benchmax.envs import BaseRollout, Example, ListDataset, completion_text

SCRIPT = Path(__file__).with_name("agent_script.py")
COMMAND = [sys.executable, str(SCRIPT)]


class ScoredAgents(AgentEnv):
    """Scores the final answer against the example's ``answer``; counts what the group saw."""

    group_sizes: list[int]

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None) -> ListDataset:
        return ListDataset([])

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"correct": float(completion_text(rollout.messages) == rollout.example_args.get("answer"))}

    async def compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> dict[str, dict[str, float]]:
        self.__dict__.setdefault("group_sizes", []).append(len(rollouts))
        return {rollout.rollout_id: {"calls": float(len(rollout.turns))} for rollout in rollouts}


def script(steps: list[dict[str, Any]]) -> str:
    return f"#script: {orjson.dumps(steps).decode()}"


TOOL_THEN_ANSWER = [
    {"tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "5"},
]


def example(steps: list[dict[str, Any]] | None = None, *, eid: str = "e1", **fields: Any) -> Example:
    content = "what is 2+3?" + (f"\n{script(steps)}" if steps is not None else "")
    return Example(eid, {"prompt_messages": [{"role": "user", "content": content}], "answer": "5", **fields})
