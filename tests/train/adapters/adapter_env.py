"""The env the trainer-adapter tests drive: one tool, logs, a context, conditional rewards."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from benchmax.envs import BaseEnv, Example, ListDataset, ToolError
from benchmax.rewards import extract_completion_text

logger = logging.getLogger("adapter_env")


class LookupEnv(BaseEnv):
    """``lookup`` answers from a table; the reply is ``correct`` when it holds the answer.

    ``used_tool`` appears only when a tool ran (conditional). Examples with
    ``broken`` fail in ``rollout_context``. ``entered``/``exited`` count contexts,
    so tests see that every rollout released what it acquired.
    """

    max_turns = 3

    def __init__(self) -> None:
        super().__init__()
        self.entered: list[str] = []
        self.exited: list[str] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([example_payload("capital of France", "Paris")])

    async def list_tools(self):
        return [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "look a key up",
                    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
                },
            }
        ]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        if tool_name != "lookup":
            raise ToolError(f"no tool named {tool_name!r}")
        logger.info("looked up %s", tool_args.get("key"))
        return "Paris"

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if example.payload.get("broken"):
            raise RuntimeError("the sandbox would not start")
        self.entered.append(rollout_id)
        try:
            yield
        finally:
            self.exited.append(rollout_id)

    async def compute_reward(self, rollout):
        text = extract_completion_text(rollout.messages)
        rewards = {"correct": float(rollout.example_args["answer"] in text)}
        if any(message["role"] == "tool" for message in rollout.messages):
            rewards["used_tool"] = 1.0
        return rewards


class RankedLookupEnv(LookupEnv):
    """Adds a group-relative component: 1.0 for the shortest reply of the group."""

    async def compute_group_rewards(self, rollouts):
        lengths = {rollout.rollout_id: len(extract_completion_text(rollout.messages)) for rollout in rollouts}
        best = min(lengths.values())
        return {rollout_id: {"shortest": float(length == best)} for rollout_id, length in lengths.items()}


def example_payload(question: str, answer: str, **extra: object) -> dict[str, object]:
    return {"prompt_messages": [{"role": "user", "content": question}], "answer": answer, **extra}


def example(question: str = "capital of France", answer: str = "Paris", **extra: object) -> Example:
    return Example(f"ex-{question.replace(' ', '-')}", example_payload(question, answer, **extra))
