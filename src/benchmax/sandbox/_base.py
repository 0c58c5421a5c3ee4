"""The one sandbox interface every provider implements.

Paths inside a sandbox are POSIX strings; a relative one is relative to the
workspace. Every method is a coroutine: sandboxes are processes or remote
containers, and waiting on them must never block the event loop that runs the
other rollouts.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import PurePosixPath
from types import TracebackType

from benchmax.sandbox._spec import ExecResult, FileInfo, Limits, SandboxSpec

DEFAULT_TIMEOUT = 60.0
DEFAULT_OUTPUT_BYTES = 1 << 20
DEFAULT_READ_BYTES = 16 << 20


class Sandbox(ABC):
    """A running sandbox. Stop it (or leave its ``async with``) to free everything it holds."""

    id: str
    spec: SandboxSpec
    provider: str
    """The provider's name (``"bwrap"``, ``"docker"``, ``"guard"``)."""

    @property
    def workspace(self) -> str:
        """The writable directory commands start in."""
        return self.spec.workdir

    def path(self, path: str) -> str:
        """``path`` made absolute inside the sandbox (relative paths are under the workspace)."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise ValueError(f"sandbox path must be a non-empty string without NUL bytes, got {path!r}")
        pure = PurePosixPath(path)
        return str(pure if pure.is_absolute() else PurePosixPath(self.workspace) / pure)

    @abstractmethod
    async def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        stdin: str | bytes | None = None,
        max_output_bytes: int = DEFAULT_OUTPUT_BYTES,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``command`` (argv, or a string for ``/bin/sh -c``) and wait for it.

        ``timeout`` is wall-clock seconds; at it the command's process group is
        killed and ``timed_out`` is set. Each of stdout and stderr keeps at most
        ``max_output_bytes``; a command that writes more is killed and
        ``output_truncated`` is set. ``limits`` overrides the per-process limits
        for this command only. The command's process group is killed when it
        exits, so nothing it left in the background outlives it unless it made
        its own session.
        """

    @abstractmethod
    async def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_BYTES) -> bytes:
        """The file's bytes; ``FileNotFoundError``/``IsADirectoryError`` as for a local file,
        ``ValueError`` when it is larger than ``max_bytes``."""

    @abstractmethod
    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file (parent directories are made as needed)."""

    @abstractmethod
    async def list_files(self, path: str = ".", *, recursive: bool = False) -> list[FileInfo]:
        """The entries of a directory (with ``recursive``, of its whole tree), sorted by path."""

    @abstractmethod
    async def copy_in(self, source: str | os.PathLike[str], path: str) -> None:
        """Copy a host file or directory tree to ``path`` in the sandbox (created or replaced)."""

    @abstractmethod
    async def copy_out(self, path: str, destination: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory tree to ``destination`` on the host."""

    @abstractmethod
    async def terminate_processes(self) -> None:
        """Kill every process in the sandbox but its own supervisor: nothing the commands
        left running (daemons included) can act after this returns."""

    @abstractmethod
    async def stop(self) -> None:
        """Kill everything in the sandbox and free what it holds. Idempotent."""

    @property
    @abstractmethod
    def stopped(self) -> bool:
        """Whether the sandbox is gone (stopped, or ended by itself)."""

    async def write_files(self, files: Mapping[str, str | bytes], *, root: str | None = None) -> None:
        """Write several files under ``root`` (default: the workspace)."""
        base = PurePosixPath(self.path(root or self.workspace))
        for name, data in files.items():
            relative = PurePosixPath(name)
            if relative.is_absolute() or ".." in relative.parts or not relative.parts:
                raise ValueError(f"file name {name!r} must be a relative path without '..'")
            await self.write_file(str(base / relative), data)

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class SandboxProvider(ABC):
    """Starts sandboxes of one kind (local bubblewrap, Docker, ...)."""

    name: str

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`SandboxUnavailable` saying how to fix it when this provider cannot run here."""

    @abstractmethod
    async def start(self, spec: SandboxSpec | None = None) -> Sandbox:
        """Start one sandbox; the caller owns it and must stop it."""

    @asynccontextmanager
    async def sandbox(self, spec: SandboxSpec | None = None) -> AsyncIterator[Sandbox]:
        """``async with provider.sandbox(spec) as sandbox:`` stops it however the block ends."""
        sandbox = await self.start(spec)
        try:
            yield sandbox
        finally:
            await sandbox.stop()

    async def aclose(self) -> None:
        """Release provider-wide resources (clients, pools). Sandboxes are stopped by their owners."""
