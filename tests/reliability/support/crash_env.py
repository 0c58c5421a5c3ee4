"""The env the crash tests run through the CLI (loaded by path, like a user's env.py).

``trace_dir`` gets one line per context enter/exit and per ``aclose``, so the
test process can count them after the child is gone. The ``slow`` tool sleeps,
to hold rollouts open while a stop signal arrives; ``spill`` returns a long text.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset
from benchmax.rewards import extract_completion_text

logger = logging.getLogger("crash_env")


class CrashEnv(BaseEnv):
    max_turns = 2

    def __init__(self, trace_dir: str | None = None) -> None:
        super().__init__()
        self.trace = Path(trace_dir) if trace_dir else None

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [
            {
                "type": "function",
                "function": {
                    "name": "slow",
                    "description": "Wait a while.",
                    "parameters": {"type": "object", "properties": {"seconds": {"type": "number"}}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "spill",
                    "description": "Return `size` characters.",
                    "parameters": {"type": "object", "properties": {"size": {"type": "integer"}}},
                },
            },
        ]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        if tool_name == "spill":
            logger.info("spilling %d characters", tool_args["size"])
            return "y" * tool_args["size"]
        await asyncio.sleep(float(tool_args.get("seconds", 1)))
        return "done"

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self._event("enter", rollout_id)
        try:
            yield
        finally:
            self._event("exit", rollout_id)

    async def compute_reward(self, rollout):
        return {"correct": float(extract_completion_text(rollout.messages).strip() == rollout.example_args["answer"])}

    async def aclose(self):
        self._event("aclose", "-")

    def _event(self, kind: str, subject: str) -> None:
        if self.trace is not None:
            self.trace.mkdir(parents=True, exist_ok=True)
            with (self.trace / "events.log").open("a") as handle:
                handle.write(f"{kind} {subject}\n")
