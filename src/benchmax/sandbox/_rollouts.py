"""One sandbox per rollout, tied to ``rollout_context`` so it is always stopped.

An env keeps a ``RolloutSandboxes`` and opens one in its ``rollout_context``::

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        async with self.sandboxes.open(rollout_id, files=example.payload["files"]):
            yield

    async def run_tool(self, rollout_id, tool_name, **args):
        result = await self.sandboxes[rollout_id].exec(args["command"])

The sandbox is stopped when the block ends however it ends (finished, failed,
cancelled). If benchmax itself is killed, the kernel ends the sandbox with it
(bubblewrap's ``--die-with-parent`` and its PID namespace); nothing is left.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager

from benchmax.sandbox._base import Sandbox, SandboxProvider
from benchmax.sandbox._pool import SandboxPool
from benchmax.sandbox._spec import SandboxSpec


class RolloutSandboxes:
    """The live sandboxes of an env's rollouts, by rollout id.

    ``warm`` keeps that many sandboxes started ahead (a :class:`SandboxPool`);
    call :meth:`aclose` from the env's ``aclose`` to stop them.
    """

    def __init__(
        self, spec: SandboxSpec | None = None, *, provider: SandboxProvider | None = None, warm: int = 0
    ) -> None:
        self.spec = spec or SandboxSpec()
        self._provider = provider
        self._warm = warm
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SandboxPool] = weakref.WeakKeyDictionary()
        self._live: dict[str, Sandbox] = {}

    @property
    def provider(self) -> SandboxProvider:
        if self._provider is None:
            from benchmax.sandbox._default import default_provider

            self._provider = default_provider()
        return self._provider

    def _pool(self) -> SandboxPool:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = SandboxPool(self.provider, self.spec, size=self._warm)
        return pool

    @asynccontextmanager
    async def open(
        self,
        rollout_id: str,
        *,
        seed: str | os.PathLike[str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> AsyncIterator[Sandbox]:
        """Start (or take a warm) sandbox for ``rollout_id``, seed its workspace, stop it on exit."""
        if rollout_id in self._live:
            raise ValueError(f"rollout {rollout_id!r} already has an open sandbox")
        sandbox = await self._pool().acquire()
        try:
            self._live[rollout_id] = sandbox
            if seed is not None:
                await sandbox.copy_in(seed, sandbox.workspace)
            if files:
                await sandbox.write_files(files)
            yield sandbox
        finally:
            self._live.pop(rollout_id, None)
            await asyncio.shield(sandbox.stop())

    def __getitem__(self, rollout_id: str) -> Sandbox:
        try:
            return self._live[rollout_id]
        except KeyError:
            raise KeyError(f"no open sandbox for rollout {rollout_id!r} (open one in rollout_context)") from None

    def __contains__(self, rollout_id: object) -> bool:
        return rollout_id in self._live

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._live))

    async def aclose(self) -> None:
        """Stop the warm sandboxes of this event loop's pool (open ones belong to their rollouts)."""
        loop = asyncio.get_running_loop()
        pool = self._pools.pop(loop, None)
        if pool is not None:
            await pool.aclose()
