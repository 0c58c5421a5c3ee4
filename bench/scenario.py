"""The benchmark's env: one tool (``add``), two model turns and one tool call per rollout.

The fake server calls ``add`` on turn 0 and answers with the tool's result on
turn 1, so every rollout that runs correctly scores ``correct == 1.0``; anything
else is counted as a failure by the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, ListDataset, Tool, ToolError
from benchmax.rewards import extract_completion_text

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def prompt(index: int) -> tuple[str, int]:
    """The question for example ``index`` and its answer (distinct per example)."""
    a, b = index, 1000 + 7 * index
    return f"What is {a} + {b}? Use the add tool.", a + b


def _rows(count: int) -> Iterator[dict[str, Any]]:
    for index in range(count):
        question, answer = prompt(index)
        yield {"prompt_messages": [{"role": "user", "content": question}], "answer": answer}


class AddEnv(BaseEnv):
    max_turns = 4

    def __init__(self, examples: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.examples = examples

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset:
        count = self.examples if max_examples is None else min(self.examples, max_examples)
        # rows made one at a time: a million-rollout run's 250k examples are not also held as dicts
        return ListDataset(_rows(count))

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if tool_name != "add":
            raise ToolError(f"unknown tool {tool_name!r}")
        return tool_args["a"] + tool_args["b"]

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages).strip()
        return {"correct": float(answer == str(rollout.example_args["answer"]))}


class JudgedAddEnv(AddEnv):
    """``AddEnv`` whose reward asks a model (the fake server) before scoring: a judge-like,
    I/O-bound reward, for measuring a rescore's bounded concurrency.

    The judge endpoint is read from ``BENCH_JUDGE_URL`` (the fake server's ``/v1``).
    """

    def __init__(self, examples: int = 1000, **kwargs: Any) -> None:
        super().__init__(examples, **kwargs)
        self._session: Any = None

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        import os

        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = {"model": "judge", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}
        async with self._session.post(f"{os.environ['BENCH_JUDGE_URL']}/chat/completions", json=body) as reply:
            reply.raise_for_status()
            await reply.read()
        return await super().compute_reward(rollout)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        await super().aclose()
