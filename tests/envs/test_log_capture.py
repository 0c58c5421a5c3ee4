"""The one log capture: records reach the collector named where they were emitted, the innermost one."""

from __future__ import annotations

import asyncio
import logging

from benchmax.envs import capture_logs, install_log_capture

log = logging.getLogger("tests.capture")


class Collector:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def _log_later(message: str) -> None:
    await asyncio.sleep(0)
    log.info(message)


async def test_nested_captures_give_each_record_to_the_innermost_collector_also_in_tasks_and_threads():
    install_log_capture()
    outer, inner = Collector(), Collector()
    log.info("before")
    with capture_logs(outer):
        log.info("outer 1")
        with capture_logs(inner):
            log.info("inner")
            await asyncio.create_task(_log_later("inner task"))
            await asyncio.to_thread(log.info, "inner thread")
        log.info("outer 2")
        await asyncio.to_thread(log.info, "outer thread")
    log.info("after")
    assert inner.messages == ["inner", "inner task", "inner thread"]
    assert outer.messages == ["outer 1", "outer 2", "outer thread"]
