"""Where groups run: in this process (the default) or on a pool of Ray actors.

The runner only sees this interface, so scheduling, store writes, zero-fill and
progress are identical whichever executor runs the groups.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from benchmax.engine.engine import Engine, EngineConfig, GroupResult
from benchmax.envs.base_env import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.envs.errors import RolloutFailure
from benchmax.envs.rollout import RolloutOutcome, RolloutRequest

logger = logging.getLogger("benchmax.runner")


class GroupExecutor(Protocol):
    async def start(self) -> None: ...

    async def run_group(self, requests: Sequence[RolloutRequest]) -> GroupResult: ...

    def stats(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


class LocalExecutor:
    """Groups run on this event loop: the engine for ``BaseEnv``, ``run_group`` otherwise."""

    def __init__(self, env: Environment, config: EngineConfig | None = None) -> None:
        self.env = env
        self.engine = Engine(env, config) if isinstance(env, BaseEnv) else None

    async def start(self) -> None:
        if self.engine is not None:
            await self.engine.start()

    async def run_group(self, requests: Sequence[RolloutRequest]) -> GroupResult:
        if self.engine is not None:
            return await self.engine.run_group(requests)
        return await run_plain_group(self.env, requests)

    def stats(self) -> dict[str, Any]:
        return self.engine.clients.stats() if self.engine is not None else {}

    async def aclose(self) -> None:
        if self.engine is not None:
            await self.engine.aclose()


async def run_plain_group(env: Environment, requests: Sequence[RolloutRequest]) -> GroupResult:
    """A custom ``Environment``'s group; an exception fails the group, never the run."""
    now = time.time()
    try:
        outcomes = await env.run_group(requests)
        return GroupResult(tuple(outcomes[request.rollout_id] for request in requests))
    except Exception as exc:
        reason = exc.reason if isinstance(exc, RolloutFailure) else "harness_error"
        logger.exception("%s.run_group failed", type(env).__name__)
        return GroupResult(
            tuple(
                RolloutOutcome(
                    rewards={},
                    termination_reason=reason,
                    error=f"{type(exc).__name__}: {exc}",
                    rollout_id=request.rollout_id,
                    example_id=request.example.id,
                    split=request.split,
                    messages=[dict(m) for m in request.example.payload.get("prompt_messages", [])],
                    started_at=now,
                    ended_at=time.time(),
                    sampling=request.sampling,
                )
                for request in requests
            )
        )
