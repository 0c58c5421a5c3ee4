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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from benchmax.envs import LogEntry, TurnRecord, truncate_text


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


def place_by_time(entries: Sequence[LogEntry], turns: Sequence[TurnRecord]) -> list[LogEntry]:
    """Records an env's own ``run_rollout`` emitted, each put among the turns it returned by when
    it was written: an agent program's stderr line between the model calls around it.

    The engine cannot follow the turns of a loop it does not run, so these records all carry
    the phase it set (``model``) and turn 0. By time: before the first turn is setting up
    (``context``); during a turn's model call is that turn's ``model``; after it, until the
    next call, its ``tools`` (the program at work on the reply); after the last turn's reply
    when it asked for no tool, ``context`` again (after the last turn).
    """
    if not turns:
        return list(entries)
    placed = []
    last = len(turns) - 1
    for entry in entries:
        if entry.phase != "model":
            placed.append(entry)
            continue
        index = next((k for k in range(last, -1, -1) if turns[k].started_at <= entry.time), None)
        if index is None:
            placed.append(replace(entry, turn=0, phase="context"))
            continue
        turn = turns[index]
        if entry.time <= turn.started_at + turn.model_seconds:
            placed.append(replace(entry, turn=index, phase="model"))
        elif index == last and not turn.tool_calls:
            placed.append(replace(entry, turn=index, phase="context"))
        else:
            placed.append(replace(entry, turn=index, phase="tools"))
    return placed
