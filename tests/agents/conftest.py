"""The rollouts an agent env runs through a real engine, against the scripted server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agent_helpers import ScoredAgents

from benchmax.client import RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import Example, RolloutOutcome, RolloutRequest
from benchmax.testing import ScriptedServer

RunGroup = Callable[..., Any]


@pytest.fixture
async def run_group(scripted_server: ScriptedServer) -> AsyncIterator[RunGroup]:
    """``await run_group(env, example, n=1, config=None)``: the group's outcomes, from a real engine."""
    engines: list[Engine] = []

    async def run(
        env: ScoredAgents, item: Example, n: int = 1, config: EngineConfig | None = None
    ) -> list[RolloutOutcome]:
        engine = Engine(env, config or EngineConfig(retry=RetryPolicy(max_attempts=1)))
        engines.append(engine)
        requests = [
            RolloutRequest(f"{item.id}-{i}", item, model="scripted", base_url=scripted_server.base_url)
            for i in range(n)
        ]
        return list((await engine.run_group(requests)).outcomes)

    yield run
    for engine in engines:
        await engine.env.aclose()
        await engine.aclose()
