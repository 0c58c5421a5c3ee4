"""The env the serve tests run locally and through ``benchmax serve``, side by side.

Tools: ``add`` (a number), ``lookup`` (raises ``ToolError`` for an unknown key:
the model sees it), ``explode`` (crashes: ``tool_error``). ``compute_reward``
scores the answer against ``answer`` and crashes when the payload says
``crash_reward``; ``compute_group_rewards`` adds a ``first`` component to the
first sibling by id. Each hook logs a line. With ``trace_dir`` every context
enter/exit is appended to ``trace_dir/events.log`` (``enter RID`` / ``exit
RID``), so a test in another process can check that contexts were torn down;
``hold`` makes the context wait that many seconds on its way in.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset, ToolError
from benchmax.rewards import extract_completion_text

logger = logging.getLogger("served_env")

TOOLS = [
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
    },
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        },
    },
    {"type": "function", "function": {"name": "explode", "description": "Crash.", "parameters": {"type": "object"}}},
]


class ServedEnv(BaseEnv):
    max_turns = 4

    def __init__(self, trace_dir: str | None = None, hold: float = 0.0) -> None:
        super().__init__()
        self.trace = Path(trace_dir) if trace_dir else None
        self.hold = hold
        if self.trace is not None:
            self.trace.mkdir(parents=True, exist_ok=True)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return TOOLS

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self._event("enter", rollout_id)
        logger.info("context entered for %s", rollout_id)
        try:
            if self.hold:
                await asyncio.sleep(self.hold)
            yield
        finally:
            self._event("exit", rollout_id)

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        logger.info("tool %s(%s) for %s", tool_name, sorted(tool_args), rollout_id)
        if tool_name == "add":
            return {"sum": tool_args["a"] + tool_args["b"]}
        if tool_name == "lookup":
            table = {"pi": "3.14"}
            if tool_args.get("key") not in table:
                raise ToolError(f"no key {tool_args.get('key')!r}")
            return table[tool_args["key"]]
        if tool_name == "explode":
            raise RuntimeError("the tool blew up")
        raise ValueError(f"Unknown tool: {tool_name}")

    async def compute_reward(self, rollout):
        if rollout.example_args.get("crash_reward"):
            raise ZeroDivisionError("the reward blew up")
        answer = extract_completion_text(rollout.messages).strip()
        logger.info("scored %s: %r after %d turns", rollout.rollout_id, answer, len(rollout.turns))
        return {"correct": float(answer == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts):
        first = min(rollout.rollout_id for rollout in rollouts)
        logger.info("group of %d scored", len(rollouts))
        return {rollout.rollout_id: {"first": float(rollout.rollout_id == first)} for rollout in rollouts}

    async def aclose(self):
        self._event("aclose", str(os.getpid()))

    def _event(self, kind: str, subject: str) -> None:
        if self.trace is not None:
            with (self.trace / "events.log").open("a") as handle:
                handle.write(f"{kind} {subject}\n")
