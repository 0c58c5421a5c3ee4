"""The log records env code emits on the server, gathered per call and sent back with its answer.

A context variable names the gathering of the call (or session) running now;
asyncio copies it into tasks a hook spawns and ``asyncio.to_thread`` into its
thread, so every record lands with the rollout that caused it, as the engine's
own capture does for a local env. The proxy logs them again on its side.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs.logging import attach_to_root, rollout_context
from benchmax.remote import wire

MAX_RECORDS = 1000
"""Records kept per call; past it they are counted, and the count is sent instead."""


@dataclass(slots=True)
class Gathering:
    """The records of one call (or of one session's context), as JSON, bounded."""

    rollout_id: str | None
    max_records: int = MAX_RECORDS
    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0

    def add(self, record: logging.LogRecord) -> None:
        if len(self.entries) >= self.max_records:
            self.dropped += 1
            return
        self.entries.append(wire.log_json(record, self.rollout_id))

    def take(self) -> list[dict[str, Any]]:
        """The records gathered since the last take (a note stands for the dropped ones)."""
        taken, self.entries = self.entries, []
        if self.dropped:
            note = logging.LogRecord(
                "benchmax.serve",
                logging.WARNING,
                "",
                0,
                "%d more log records were dropped (limit %d)",
                (self.dropped, self.max_records),
                None,
            )
            taken.append(wire.log_json(note, self.rollout_id))
            self.dropped = 0
        return taken


_CURRENT: ContextVar[Gathering | None] = ContextVar("benchmax_serve_gathering", default=None)


class _Handler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)

    def emit(self, record: logging.LogRecord) -> None:
        gathering = _CURRENT.get()
        if gathering is not None:
            gathering.add(record)


_handler = _Handler()


def install(level: int = logging.INFO) -> None:
    """Attach the gathering handler to the root logger (idempotent); console handlers keep their level."""
    attach_to_root(_handler, level)


@contextmanager
def gathering(target: Gathering) -> Iterator[Gathering]:
    """Gather what is logged inside (and in what it spawns) into ``target``, under its rollout id."""
    token = _CURRENT.set(target)
    try:
        if target.rollout_id is None:
            yield target
        else:
            with rollout_context(target.rollout_id):
                yield target
    finally:
        _CURRENT.reset(token)
