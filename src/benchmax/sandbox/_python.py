"""Running an untrusted Python program: inside a sandbox, by default a fresh one per run.

Model-written code is hostile until proven otherwise. ``run_python`` writes the
program as ``main.py`` into a sandbox's workspace (with any helper files), runs
it with the sandbox's interpreter under per-run limits, and reports what
happened. Without ``sandbox=`` every run gets a fresh sandbox from the default
provider (:func:`default_provider`, bubblewrap unless ``BENCHMAX_SANDBOX`` says
otherwise) that is stopped afterwards; pass a rollout's sandbox to keep files
between runs.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from benchmax.aio import block_on
from benchmax.sandbox._base import Sandbox, SandboxProvider
from benchmax.sandbox._default import default_provider
from benchmax.sandbox._errors import SandboxEnded
from benchmax.sandbox._guard import GuardSandbox
from benchmax.sandbox._spec import ExecResult, Limits, SandboxSpec

_MAIN = "main.py"
_TRUNCATED = "\n…[output truncated]"


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one program run did. ``exit_code`` is negative when a signal ended it (-9: killed).

    ``isolation`` names the provider it ran in (``"bwrap"``, ``"docker"``, or the
    opt-in ``"guard"`` fallback, which is not a security boundary).
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    output_truncated: bool
    duration_s: float
    isolation: str

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0 and nothing was cut short."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated

    @property
    def memory_error(self) -> bool:
        """The program died of the memory limit (Python reports ``MemoryError``)."""
        tail = self.stderr.rstrip().rsplit("\n", 1)[-1]
        return tail.startswith("MemoryError")


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _fresh_run_slots() -> asyncio.Semaphore:
    """One slot per CPU (at least two) for runs in fresh sandboxes: bounds their CPU contention."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(max(2, os.cpu_count() or 2))
    return slots


def _check_arguments(timeout: float, memory_mb: int, files: Mapping[str, str | bytes]) -> None:
    if not isinstance(timeout, (int, float)) or not timeout > 0 or not math.isfinite(timeout):
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    if memory_mb < 32:
        raise ValueError(f"memory_mb must be at least 32 (the interpreter needs it), got {memory_mb!r}")
    for name in files:
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ValueError(
                f"sandbox file name {name!r} must be a relative path inside the temp dir it runs in (the workspace)"
            )
        if str(relative) == _MAIN:
            raise ValueError(f"sandbox file name {name!r} is reserved for the program itself")


async def run_python_async(
    code: str,
    *,
    stdin: str | bytes | None = None,
    timeout: float = 10.0,
    memory_mb: int = 512,
    files: Mapping[str, str | bytes] | None = None,
    max_output_bytes: int = 1 << 20,
    max_file_mb: int = 64,
    python: str | None = None,
    sandbox: Sandbox | None = None,
    provider: SandboxProvider | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` and return what happened.

    ``files`` are written beside it first (relative paths) and import as modules.
    ``timeout`` is wall-clock seconds; CPU time is capped just above it,
    ``memory_mb`` is the address-space limit and ``max_file_mb`` the largest
    file. Each of stdout and stderr keeps at most ``max_output_bytes``; past that
    the program is killed and ``output_truncated`` is set. ``python`` is the
    interpreter (by default benchmax's own for the local provider, ``python3``
    in an image or rootfs).

    With ``sandbox`` the program runs there and its files stay (a rollout's
    scratch space); otherwise a fresh sandbox from ``provider`` (default:
    :func:`default_provider`) is started and stopped around it.

    Raises :class:`SandboxError` when the sandbox fails (:class:`SandboxUnavailable`
    with the fix when none can run here) and ``ValueError`` for a bad argument.
    """
    files = dict(files or {})
    _check_arguments(timeout, memory_mb, files)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    limits = Limits(
        cpu_seconds=math.ceil(timeout) + 1,
        memory_mb=int(memory_mb),
        file_size_mb=int(max_file_mb),
        open_files=256,
    )
    if sandbox is not None:
        return await _run_in(sandbox, code, data, files, timeout, limits, max_output_bytes, python)
    provider = provider or default_provider()
    async with _fresh_run_slots():
        spec = SandboxSpec(python=python if provider.name == "bwrap" else None, limits=Limits(disk_mb=256, tmp_mb=64))
        async with provider.sandbox(spec) as fresh:
            return await _run_in(fresh, code, data, files, timeout, limits, max_output_bytes, python)


async def _run_in(
    sandbox: Sandbox,
    code: str,
    stdin: bytes | None,
    files: Mapping[str, str | bytes],
    timeout: float,
    limits: Limits,
    max_output_bytes: int,
    python: str | None,
) -> SandboxResult:
    await sandbox.write_files({**files, _MAIN: code})
    if isinstance(sandbox, GuardSandbox):
        run = await sandbox.run_program(
            _MAIN, stdin=stdin, timeout=timeout, limits=limits, max_output_bytes=max_output_bytes
        )
        isolation = "guard"
    else:
        interpreter = python or getattr(sandbox, "python", None) or "python3"
        isolation = sandbox.provider
        started = time.monotonic()
        try:
            run = await sandbox.exec(
                [interpreter, "-E", "-s", "-B", "-X", "utf8", _MAIN],
                stdin=stdin,
                timeout=timeout,
                limits=limits,
                max_output_bytes=max_output_bytes,
            )
        except SandboxEnded as exc:
            # the program killed the sandbox's supervisor (it runs as the same user): its own end
            return SandboxResult(
                stdout="",
                stderr=f"the program ended the sandbox it ran in (its supervisor is gone: {exc}); counted as killed",
                exit_code=-9,
                timed_out=False,
                output_truncated=False,
                duration_s=time.monotonic() - started,
                isolation=isolation,
            )
    return _result(run, isolation, max_output_bytes)


def _result(run: ExecResult, isolation: str, limit: int) -> SandboxResult:
    stdout, stderr = run.stdout, run.stderr
    if run.output_truncated:
        # both streams are cut at the limit; mark the one that reached it
        if len(stdout.encode("utf-8", "surrogateescape")) >= limit:
            stdout += _TRUNCATED
        else:
            stderr += _TRUNCATED
    return SandboxResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        output_truncated=run.output_truncated,
        duration_s=run.duration_s,
        isolation=isolation,
    )


def run_python(code: str, **options: Any) -> SandboxResult:
    """:func:`run_python_async` for synchronous callers, each run in a fresh sandbox.

    Blocks the calling thread. Called from a thread that runs an event loop, it
    runs on a helper thread (so it never re-enters that loop); prefer the async
    form there.
    """
    if options.get("sandbox") is not None:
        raise TypeError("run_python(sandbox=...) needs the async form: await run_python_async(code, sandbox=...)")
    return block_on(run_python_async(code, **options), name="benchmax-run-python")
