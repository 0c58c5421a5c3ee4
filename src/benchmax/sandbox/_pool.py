"""Warm starts: sandboxes started ahead of need, each handed out once and never reused.

A sandbox that served one rollout may hold anything that rollout left (files,
daemons), so the pool does not recycle: it keeps ``size`` fresh ones started and
starts a replacement whenever one is taken. Taking from a pool costs a queue
pop instead of a sandbox start (see ``bench/sandbox.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchmax.sandbox._base import Sandbox, SandboxProvider
from benchmax.sandbox._spec import SandboxSpec

logger = logging.getLogger("benchmax.sandbox")


class SandboxPool:
    """``size`` ready sandboxes of one ``spec`` from ``provider`` (default: :func:`default_provider`).

    Use one pool per event loop, and close it (``await pool.aclose()`` or
    ``async with pool:``) to stop the idle ones.
    """

    def __init__(self, provider: SandboxProvider | None = None, spec: SandboxSpec | None = None, *, size: int = 4):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"SandboxPool size must be an int >= 0, got {size!r}")
        self._provider = provider
        self.spec = spec or SandboxSpec()
        self.size = size
        self._ready: deque[Sandbox] = deque()
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False
        self._failure: BaseException | None = None
        self.hits = 0
        self.misses = 0

    @property
    def provider(self) -> SandboxProvider:
        if self._provider is None:
            from benchmax.sandbox._default import default_provider

            self._provider = default_provider()
        return self._provider

    @property
    def failure(self) -> BaseException | None:
        """Why the pool stopped refilling (a start failed), if it did; takes then start sandboxes directly."""
        return self._failure

    @property
    def ready(self) -> int:
        """How many started sandboxes wait to be taken."""
        return len(self._ready)

    async def fill(self) -> None:
        """Start sandboxes until ``size`` are ready, and wait for them."""
        self._refill()
        while self._starting:
            await asyncio.gather(*self._starting, return_exceptions=True)
        if self._failure is not None and not self._ready:
            raise self._failure

    def _refill(self) -> None:
        if self._closed or self._failure is not None:
            return
        # a finished start leaves _starting only in its done-callback, a loop turn later: count pending ones
        while len(self._ready) + sum(not task.done() for task in self._starting) < self.size:
            task = asyncio.create_task(self._start_one(), name="sandbox-pool-start")
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        try:
            sandbox = await self.provider.start(self.spec)
        except Exception as exc:
            # stop refilling: a provider that failed once will most likely fail again
            self._failure = exc
            logger.warning("sandbox pool stops refilling: %s", exc)
            return
        if self._closed:
            await sandbox.stop()
        else:
            self._ready.append(sandbox)

    async def acquire(self) -> Sandbox:
        """A fresh sandbox, now: a ready one if any, else one started for the caller. The caller stops it."""
        if self._closed:
            raise RuntimeError("this SandboxPool is closed")
        while self._ready:
            sandbox = self._ready.popleft()
            if not sandbox.stopped:
                self.hits += 1
                self._refill()
                return sandbox
        self.misses += 1
        self._refill()
        return await self.provider.start(self.spec)

    @asynccontextmanager
    async def sandbox(self) -> AsyncIterator[Sandbox]:
        """``async with pool.sandbox() as sandbox:``, stopped however the block ends."""
        sandbox = await self.acquire()
        try:
            yield sandbox
        finally:
            await asyncio.shield(sandbox.stop())

    async def aclose(self) -> None:
        """Stop the idle sandboxes and the ones still starting."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        while self._ready:
            await self._ready.popleft().stop()

    async def __aenter__(self) -> SandboxPool:
        await self.fill()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
