"""The log records env code emits on the server, gathered per call and sent back with its answer.

Each call (or session) captures into its own :class:`Gathering` through the
contract's one capture (:func:`benchmax.envs.capture_logs`), the one the engine
uses for a local env, so every record lands with the rollout that caused it. The
proxy logs them again on its side.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs import capture_logs
from benchmax.envs.logging import rollout_context
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


@contextmanager
def gathering(target: Gathering) -> Iterator[Gathering]:
    """Gather what is logged inside (and in what it spawns) into ``target``, under its rollout id."""
    with capture_logs(target):
        if target.rollout_id is None:
            yield target
        else:
            with rollout_context(target.rollout_id):
                yield target
