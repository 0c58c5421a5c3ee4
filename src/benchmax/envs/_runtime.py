"""The one seam from the contract to the engine.

``Environment.run_group`` and ``BaseEnv.run_rollout`` are 0.2.x's entry points
for trainers that drive an env directly; the loop that implements them lives in
:mod:`benchmax.engine`, which depends on this package, not the other way round.
The engine registers itself here when it is imported; an env used on its own
(``await env.run_group(...)`` in a notebook) loads it by name the first time.
A registry rather than an import keeps the contract importable and testable
without the engine, its HTTP client or aiohttp.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from benchmax.envs._scope import current_scope

ENGINE_MODULE = "benchmax.engine"


class EngineFactory(Protocol):
    def __call__(self, env: Any) -> Any: ...


_factory: EngineFactory | None = None
_ATTRIBUTE = "_benchmax_engine"


def register_engine(factory: EngineFactory) -> None:
    """Called by :mod:`benchmax.engine` at import: how to build an engine for an env."""
    global _factory
    _factory = factory


def engine_for(env: Any) -> Any:
    """The engine that runs ``env``: the one driving it now, else the env's own default engine.

    The default engine is created on first use and kept on the env, so its HTTP
    connections are reused; ``BaseEnv.aclose`` closes it.
    """
    running = current_scope().engine
    if running is not None and running.env is env:
        return running
    engine = env.__dict__.get(_ATTRIBUTE)
    if engine is None:
        if _factory is None:
            importlib.import_module(ENGINE_MODULE)
        assert _factory is not None, f"{ENGINE_MODULE} did not register its engine"
        engine = _factory(env)
        env.__dict__[_ATTRIBUTE] = engine
    return engine


async def close_default_engine(env: Any) -> None:
    engine = env.__dict__.pop(_ATTRIBUTE, None)
    if engine is not None:
        await engine.aclose()
