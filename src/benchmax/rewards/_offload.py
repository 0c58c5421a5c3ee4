"""Keeping CPU-heavy scoring off the event loop.

A reward hook that burns CPU inline (regexes over long texts, sympy, BLEU over
a big group) stalls every rollout in flight: no model replies are read, no tool
calls dispatched. :func:`run_sync` moves a call to a small thread pool (log
records stay with their rollout); :func:`run_in_process` moves a picklable
call to a process pool, for pure-Python work that would otherwise hold the GIL.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_threads: ThreadPoolExecutor | None = None
_processes: ProcessPoolExecutor | None = None


def _workers() -> int:
    return max(1, os.cpu_count() or 1)


def _thread_pool() -> ThreadPoolExecutor:
    global _threads
    with _lock:
        if _threads is None:
            _threads = ThreadPoolExecutor(max_workers=_workers() + 2, thread_name_prefix="benchmax-reward")
        return _threads


def _process_pool() -> ProcessPoolExecutor:
    global _processes
    with _lock:
        if _processes is None:
            # spawn: forking a process that runs aiohttp and threads is unsafe.
            context = multiprocessing.get_context("spawn")
            _processes = ProcessPoolExecutor(max_workers=_workers(), mp_context=context)
        return _processes


async def run_sync(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``await run_sync(score, text)``: run a blocking call on the reward thread pool."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_thread_pool(), call)


async def run_in_process(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a module-level function in the shared process pool (arguments must pickle).

    Log records emitted in the worker are not attributed to the rollout; log
    from the caller instead.
    """
    call = functools.partial(func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_process_pool(), call)


def shutdown() -> None:
    """Stop the pools (also done at interpreter exit)."""
    global _threads, _processes
    with _lock:
        threads, _threads = _threads, None
        processes, _processes = _processes, None
    if threads is not None:
        threads.shutdown(wait=False, cancel_futures=True)
    if processes is not None:
        processes.shutdown(wait=False, cancel_futures=True)


atexit.register(shutdown)
