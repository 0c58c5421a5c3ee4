"""The env the runner, store and CLI tests drive (loaded by path, like a user's env.py).

Rewards: ``correct`` (the answer matches) on every scored rollout, and the
conditional ``bonus`` only for examples whose payload carries one, so the batch
zero-fill has something to fill. With ``trace_dir`` it appends one line per
context enter/exit and per ``aclose`` to ``trace_dir/events.log`` (and its
constructor kwargs to ``kwargs.json``), so a test in another process can count them.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset
from benchmax.rewards import extract_completion_text

logger = logging.getLogger("scored_env")


class ScoredEnv(BaseEnv):
    max_turns = 1

    def __init__(self, trace_dir: str | None = None, **options: object) -> None:
        super().__init__()
        self.trace = Path(trace_dir) if trace_dir else None
        if self.trace is not None:
            self.trace.mkdir(parents=True, exist_ok=True)
            (self.trace / "kwargs.json").write_text(json.dumps({"trace_dir": trace_dir, **options}))

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self._event("enter", rollout_id)
        try:
            yield
        finally:
            self._event("exit", rollout_id)

    async def compute_reward(self, rollout):
        answer = extract_completion_text(rollout.messages).strip()
        logger.info("scored %s: %r", rollout.rollout_id, answer)
        rewards = {"correct": float(answer == rollout.example_args["answer"])}
        if "bonus" in rollout.example_args:
            rewards["bonus"] = float(rollout.example_args["bonus"])
        return rewards

    async def aclose(self):
        self._event("aclose", str(os.getpid()))

    def _event(self, kind: str, subject: str) -> None:
        if self.trace is not None:
            with (self.trace / "events.log").open("a") as handle:
                handle.write(f"{kind} {subject}\n")
