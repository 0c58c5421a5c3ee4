"""Shared fixtures: a real scripted model server on loopback, and requests aimed at it.

Scripts ride in the prompt (``#script: [...]``, see :mod:`benchmax.testing`),
so one server serves many rollouts that each behave differently.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import orjson
import pytest

from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, Example, RolloutRequest, canonical_example_id
from benchmax.testing import ScriptedServer

MakeRequest = Callable[..., RolloutRequest]


def script_line(steps: Sequence[dict[str, Any]]) -> str:
    """The prompt line that makes the scripted server play ``steps``, one per model turn."""
    return f"#script: {orjson.dumps(list(steps)).decode()}"


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A running :class:`ScriptedServer` (echo policy) with an empty request log."""
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def make_request(scripted_server: ScriptedServer) -> MakeRequest:
    """Build a ``RolloutRequest`` against ``scripted_server``.

    ``make_request(steps, text="...", rollout_id=..., example=..., **fields)``: the
    prompt is ``text`` plus the script line for ``steps`` (none: the echo policy
    answers); ``fields`` join the example payload. Pass ``example`` to make siblings
    share one example. Remaining keywords (``model_auth``, ``split``, ``sampling``)
    go to the request.
    """
    counter = itertools.count()

    def make(
        steps: Sequence[dict[str, Any]] | None = None,
        *,
        text: str = "question",
        rollout_id: str | None = None,
        example: Example | None = None,
        fields: dict[str, Any] | None = None,
        **request_kwargs: Any,
    ) -> RolloutRequest:
        number = next(counter)
        if example is None:
            content = text if steps is None else f"{text}\n{script_line(steps)}"
            payload = {"prompt_messages": [{"role": "user", "content": content}], **(fields or {})}
            example = Example(canonical_example_id(payload), payload)
        return RolloutRequest(
            rollout_id=rollout_id or f"r{number}",
            example=example,
            model="scripted",
            base_url=scripted_server.base_url,
            **request_kwargs,
        )

    return make


@pytest.fixture
async def make_engine() -> AsyncIterator[Callable[..., Engine]]:
    """``make_engine(env, config=None, clients=None)``: an :class:`Engine`, closed after the test."""
    engines: list[Engine] = []

    def make(env: BaseEnv, config: EngineConfig | None = None, **kwargs: Any) -> Engine:
        engine = Engine(env, config, **kwargs)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        await engine.aclose()


class LoopTicks:
    """How often a task sleeping ``interval`` woke: proof the event loop stayed free."""

    def __init__(self) -> None:
        self.count = 0


@contextlib.asynccontextmanager
async def _ticking(interval: float) -> AsyncIterator[LoopTicks]:
    ticks = LoopTicks()

    async def tick() -> None:
        while True:
            await asyncio.sleep(interval)
            ticks.count += 1

    task = asyncio.create_task(tick())
    try:
        yield ticks
    finally:
        task.cancel()


@pytest.fixture
def loop_ticks() -> Callable[[float], contextlib.AbstractAsyncContextManager[LoopTicks]]:
    """``async with loop_ticks(0.01) as ticks: ...`` then assert on ``ticks.count``."""
    return _ticking
