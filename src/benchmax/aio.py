"""The bridge from synchronous code to coroutines, once for every package.

Sync callers of async code come in two kinds. A one-off call (a sync SDK client
asking for model-auth headers, ``run_python``, a trainer's dataset) may itself
sit inside a running event loop, where a nested ``asyncio.run`` is impossible:
:func:`block_on` then runs the coroutine on a helper thread. A long-lived caller
(a trainer driving the engine step after step, a reward adapter called per
sample) needs one loop that keeps its clients and resources across calls:
:class:`LoopThread`. This module sits below every other package so each of them
can use it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "block_on"]

T = TypeVar("T")


def block_on(coroutine: Coroutine[Any, Any, T], *, name: str = "benchmax-block-on") -> T:
    """Run ``coroutine`` to completion from synchronous code and return its result.

    With no loop running in this thread it is ``asyncio.run``. Inside a running
    loop (sync code called from async code) the coroutine runs in a fresh loop on
    a helper thread, in a copy of the caller's context (so context variables such
    as bound model-auth providers and the current rollout stay visible); the
    caller's loop is blocked meanwhile, so the coroutine must not need it.
    Exceptions, ``BaseException`` included, reach the caller as raised.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    snapshot = contextvars.copy_context()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = snapshot.run(asyncio.run, coroutine)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


class LoopThread:
    """One event loop on a daemon thread, so a synchronous caller can drive async code across calls.

    The loop lives until :meth:`close`: model clients, batchers and env resources
    keep their loop for the whole run, and work submitted with :meth:`run` goes on
    while the caller's thread does something else between calls. Calls from
    several threads at once run concurrently on the one loop.
    """

    def __init__(self, *, name: str = "benchmax-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result (not from the loop's own thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
