"""Log records captured where they were emitted: one handler on the root logger, one context variable.

Env code just logs; whoever runs it (the engine around a rollout or a group hook,
``benchmax serve`` around a call) names a collector for the code it runs, and every
record emitted there, also from tasks that code spawns (asyncio copies the context)
and ``asyncio.to_thread`` work (which copies it into the thread), reaches that
collector. The engine and the server keep different records (``LogEntry`` with a
turn and phase; the wire's JSON with a rollout id), so each brings its own
collector, and this module only routes: one mechanism for both.

Captures nest: the innermost one gets the record, and the outer one gets records
again once the inner one is left. So an env served by ``benchmax serve`` whose hook
runs an ``Engine`` keeps the inner rollouts' records in the inner outcomes, as the
same env run by a local engine does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, TypeVar

from benchmax.envs.logging import attach_to_root

__all__ = ["LogCollector", "capture_logs", "install_log_capture"]


class LogCollector(Protocol):
    """Keeps the records routed to it (bounded as it sees fit)."""

    def add(self, record: logging.LogRecord) -> None: ...


C = TypeVar("C", bound=LogCollector)

_COLLECTOR: ContextVar[LogCollector | None] = ContextVar("benchmax_log_collector", default=None)


class _CaptureHandler(logging.Handler):
    """Holds its own reference to the context variable: records logged while the
    interpreter shuts down (an unclosed session's ``__del__``) arrive after module
    globals are cleared."""

    def __init__(self, collector: ContextVar[LogCollector | None]) -> None:
        super().__init__(level=logging.NOTSET)
        self._collector = collector

    def emit(self, record: logging.LogRecord) -> None:
        collector = self._collector.get()
        if collector is not None:
            collector.add(record)


_handler = _CaptureHandler(_COLLECTOR)


def install_log_capture(level: int = logging.INFO) -> None:
    """Attach the capturing handler to the root logger (idempotent), letting ``level`` through;
    console handlers keep showing what they showed before."""
    attach_to_root(_handler, level)


@contextmanager
def capture_logs(collector: C) -> Iterator[C]:
    """Route records emitted in this context (and the tasks and threads it spawns) to ``collector``."""
    token = _COLLECTOR.set(collector)
    try:
        yield collector
    finally:
        _COLLECTOR.reset(token)
