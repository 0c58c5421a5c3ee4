"""Attributing stdlib log records to rollouts (0.2.x's module path).

Env code just logs (``logging.getLogger(__name__).info(...)``) from any hook or
anything it awaits: the engine captures each record with the rollout it belongs
to, also from tasks a hook spawns and ``asyncio.to_thread`` work, and stores it
beside the transcript. ``rollout_context``/``group_context`` name the rollout (or
group) for code that runs rollouts by hand; the engine sets them itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from benchmax.envs._scope import CURRENT_GROUP_RIDS as _CURRENT_GROUP_RIDS
from benchmax.envs._scope import CURRENT_ROLLOUT_ID as _CURRENT_ROLLOUT_ID
from benchmax.envs._scope import group_scope, rollout_scope

__all__ = [
    "_CURRENT_GROUP_RIDS",
    "_CURRENT_ROLLOUT_ID",
    "attach_to_root",
    "current_rollout_id",
    "group_context",
    "rollout_context",
]


def current_rollout_id() -> str | None:
    """The rollout the running code belongs to, if any: who to attribute a request or a log line to."""
    return _CURRENT_ROLLOUT_ID.get()


@contextmanager
def rollout_context(rollout_id: str) -> Iterator[None]:
    """Attribute the records logged inside to one rollout (0.2.x's name for :func:`benchmax.envs.rollout_scope`)."""
    with rollout_scope(rollout_id):
        yield


@contextmanager
def group_context(rollout_ids: Iterable[str]) -> Iterator[None]:
    """Attribute the records logged inside to a group of rollouts (0.2.x for :func:`benchmax.envs.group_scope`)."""
    with group_scope(rollout_ids):
        yield


def attach_to_root(handler: logging.Handler, level: int = logging.INFO) -> None:
    """Attach ``handler`` to the root logger (idempotent), which must then let ``level`` through.

    The root logger's level is lowered to ``level`` when it is higher, or INFO
    records from env code would be dropped before any handler saw them; handlers
    already there keep showing only what they showed before.
    """
    root = logging.getLogger()
    if handler not in root.handlers:
        root.addHandler(handler)
    previous = root.getEffectiveLevel()
    if previous > level:
        root.setLevel(level)
        for existing in root.handlers:
            if existing is not handler and existing.level == logging.NOTSET:
                existing.setLevel(previous)
