"""Attributing stdlib log records to rollouts (0.2.x's module path).

Env code just logs (``logging.getLogger(__name__).info(...)``) from any hook or
anything it awaits: the engine captures each record with the rollout it belongs
to, also from tasks a hook spawns and ``asyncio.to_thread`` work, and stores it
beside the transcript. ``rollout_context``/``group_context`` name the rollout (or
group) for code that runs rollouts by hand; the engine sets them itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["_CURRENT_GROUP_RIDS", "_CURRENT_ROLLOUT_ID", "group_context", "rollout_context"]

_CURRENT_ROLLOUT_ID: ContextVar[str | None] = ContextVar("benchmax_capture_rollout_id", default=None)
_CURRENT_GROUP_RIDS: ContextVar[tuple[str, ...] | None] = ContextVar("benchmax_capture_group_rids", default=None)


@contextmanager
def rollout_context(rollout_id: str) -> Iterator[None]:
    """Attribute the records logged inside to one rollout."""
    token = _CURRENT_ROLLOUT_ID.set(str(rollout_id))
    try:
        yield
    finally:
        _CURRENT_ROLLOUT_ID.reset(token)


@contextmanager
def group_context(rollout_ids: Iterable[str]) -> Iterator[None]:
    """Attribute the records logged inside to a group of rollouts."""
    token = _CURRENT_GROUP_RIDS.set(tuple(str(rollout_id) for rollout_id in rollout_ids))
    try:
        yield
    finally:
        _CURRENT_GROUP_RIDS.reset(token)
