"""The rollout scope: the one piece of ambient state that crosses packages.

Env code logs and calls the model from any hook or anything it awaits, and what
it does must be attributed to its rollout without the author passing anything
along (the contract in ``docs/contract.md`` has no such argument). So the
engine enters one :class:`RolloutScope` per rollout, and every package that needs
to know "which rollout is this" reads it through :func:`current_scope`: the model
client (whose call it meters, and whose clock stops while an endpoint is down),
the progress display, the served-env proxy and the contract's own registry. One
``ContextVar``, owned here, instead of one per fact imported across packages.

0.2.x exposed two of these facts as ``ContextVar`` objects in
``benchmax.envs.logging``; :class:`_ScopeField` keeps those names working as views
of the scope, so there is still one state.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = ["HoldClock", "RolloutScope", "current_scope", "enter_scope", "group_scope", "rollout_scope"]


@runtime_checkable
class HoldClock(Protocol):
    """A clock that stops while the scope's requests wait for a down endpoint (the engine's rollout timeout).

    The model client calls ``pause`` when a request starts waiting at a gate and
    ``resume`` when it stops; calls nest.
    """

    def pause(self) -> None: ...

    def resume(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RolloutScope:
    """Who the code running now works for: entered by the engine around each rollout."""

    rollout_id: str | None = None
    group_ids: tuple[str, ...] | None = None
    """The rollouts of the group being scored, while group hooks run."""
    hold: HoldClock | None = None
    """The rollout's clock, paused while one of its requests waits for a down endpoint."""
    engine: Any = None
    """The engine running the rollout: an env's ``run_rollout`` override that calls
    ``super().run_rollout`` runs the standard loop on it (its pool, limits and logs).
    Typed loosely because the contract may not import the engine."""
    attempt: Any = None
    """The engine's record of the rollout in progress, which that standard loop records into.
    Opaque here, like ``engine``: the scope is the one ambient "current rollout"."""
    trace: Any = None
    """The rollout's trace (``benchmax.telemetry``'s root span) while tracing is on: a model
    call made for the rollout from another task (the recording proxy) joins it. Opaque here:
    the contract does not depend on OpenTelemetry."""


_EMPTY = RolloutScope()
_SCOPE: ContextVar[RolloutScope] = ContextVar("benchmax_rollout_scope", default=_EMPTY)


def current_scope() -> RolloutScope:
    """The scope of the running code (an empty one outside any rollout)."""
    return _SCOPE.get()


@contextmanager
def enter_scope(new: RolloutScope) -> Iterator[RolloutScope]:
    """Run the body inside ``new``; the previous scope comes back on exit."""
    token = _SCOPE.set(new)
    try:
        yield new
    finally:
        _SCOPE.reset(token)


@contextmanager
def rollout_scope(rollout_id: str) -> Iterator[RolloutScope]:
    """Attribute what runs inside to one rollout, keeping the rest of the current scope."""
    with enter_scope(replace(_SCOPE.get(), rollout_id=str(rollout_id))) as entered:
        yield entered


@contextmanager
def group_scope(rollout_ids: Iterable[str]) -> Iterator[RolloutScope]:
    """Attribute what runs inside to a group of rollouts, keeping the rest of the current scope."""
    with enter_scope(replace(_SCOPE.get(), group_ids=tuple(str(rollout_id) for rollout_id in rollout_ids))) as entered:
        yield entered


T = TypeVar("T")


class _ScopeField(Generic[T]):
    """One field of the scope with ``ContextVar``'s interface, for 0.2.x code that reads or sets it directly."""

    def __init__(self, name: str, field: str) -> None:
        self.name = name
        self._field = field

    def get(self, default: T | None = None) -> T | None:
        value = getattr(_SCOPE.get(), self._field)
        return default if value is None else value

    def set(self, value: T | None) -> Token[RolloutScope]:
        return _SCOPE.set(replace(_SCOPE.get(), **{self._field: value}))

    def reset(self, token: Token[RolloutScope]) -> None:
        _SCOPE.reset(token)

    def __repr__(self) -> str:
        return f"<scope field {self.name}={self.get()!r}>"


CURRENT_ROLLOUT_ID: _ScopeField[str] = _ScopeField("benchmax_capture_rollout_id", "rollout_id")
CURRENT_GROUP_RIDS: _ScopeField[tuple[str, ...]] = _ScopeField("benchmax_capture_group_rids", "group_ids")
