"""What the engine keeps of the log records of one rollout (or one group hook).

The routing is the contract's (:func:`benchmax.envs.capture_logs`): the engine
captures into a :class:`LogSink` around each rollout, so a ``logger.info``
anywhere below a hook, in a task it spawns or a thread it hands work to, lands
with its rollout, with no argument threading through env code.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field

from benchmax.envs import LogEntry, truncate_text


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
        message = truncate_text(message, self.max_message_chars)
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
