"""Attributing stdlib log records to the rollout that emitted them.

A context variable names the current rollout's sink. asyncio copies context into
tasks a hook spawns and ``asyncio.to_thread`` copies it into the worker thread,
so a ``logger.info`` anywhere below a hook lands with its rollout, with no
argument threading through env code.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from benchmax.envs import LogEntry
from benchmax.envs.logging import attach_to_root

_SINK: ContextVar[LogSink | None] = ContextVar("benchmax_log_sink", default=None)


@dataclass(slots=True)
class LogSink:
    """Collects one rollout's (or one group hook's) records, bounded in count and size."""

    max_records: int = 1000
    max_message_chars: int = 16_384
    turn: int = 0
    phase: str = "context"
    entries: list[LogEntry] = field(default_factory=list)
    dropped: int = 0

    def add(self, record: logging.LogRecord) -> None:
        if len(self.entries) >= self.max_records:
            self.dropped += 1
            return
        try:
            message = record.getMessage()
        except Exception as exc:
            message = f"<unformattable log message {record.msg!r}: {exc}>"
        if len(message) > self.max_message_chars:
            cut = len(message) - self.max_message_chars
            message = f"{message[: self.max_message_chars]}…[truncated {cut} chars]"
        tb = None
        if record.exc_info and record.exc_info[0] is not None:
            tb = "".join(traceback.format_exception(*record.exc_info))[-self.max_message_chars :]
        elif record.stack_info:
            tb = record.stack_info[-self.max_message_chars :]
        self.entries.append(
            LogEntry(
                time=record.created,
                level=record.levelname,
                logger=record.name,
                message=message,
                file=record.pathname,
                line=record.lineno,
                turn=self.turn,
                phase=self.phase,
                traceback=tb,
            )
        )

    def freeze(self) -> tuple[LogEntry, ...]:
        if not self.dropped:
            return tuple(self.entries)
        note = LogEntry(
            time=time.time(),
            level="WARNING",
            logger="benchmax",
            message=f"{self.dropped} more log records were dropped (limit {self.max_records})",
            file="",
            line=0,
            turn=self.turn,
            phase=self.phase,
        )
        return (*self.entries, note)


class _RolloutLogHandler(logging.Handler):
    """Holds its own reference to the context variable: records logged while the
    interpreter shuts down (an unclosed session's ``__del__``) arrive after module
    globals are cleared."""

    def __init__(self, sink: ContextVar[LogSink | None]) -> None:
        super().__init__(level=logging.NOTSET)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        sink = self._sink.get()
        if sink is not None:
            sink.add(record)


_handler = _RolloutLogHandler(_SINK)


def install(level: int = logging.INFO) -> None:
    """Attach the capturing handler to the root logger (idempotent), letting ``level`` through."""
    attach_to_root(_handler, level)


@contextmanager
def capture(sink: LogSink) -> Iterator[LogSink]:
    """Route records emitted in this context (and tasks/threads it spawns) to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)
