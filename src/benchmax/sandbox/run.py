"""Running an untrusted Python program in a limited, throw-away subprocess.

Model-written code is hostile until proven otherwise: it may loop forever,
allocate without end, flood stdout, open sockets or write outside its
directory. Each run gets a fresh temp dir as its cwd, a scrubbed environment
(no API keys leak in), kernel rlimits on memory, CPU time, file size and open
files, an empty network namespace where the kernel allows one, and an audit
hook for the rest. The whole process group is killed at the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

NetworkIsolation = Literal["namespace", "audit_hook"]

_BOOTSTRAP = str(Path(__file__).with_name("_bootstrap.py"))
_SETUP_FAILED = 125
_MAIN = "main.py"
_CHUNK = 65536
_TRUNCATED = "\n…[output truncated]"


class SandboxError(RuntimeError):
    """The sandbox itself could not run the program (not the program failing).

    Reward code turns this into ``RolloutFailure("sandbox_error", ...)`` so an
    infrastructure fault never scores as a wrong answer.
    """


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """What one run did. ``exit_code`` is negative when a signal ended it (-9: killed)."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    output_truncated: bool
    duration_s: float
    network_isolation: NetworkIsolation

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0 and nothing was cut short."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated

    @property
    def memory_error(self) -> bool:
        """The program died of the memory limit (Python reports ``MemoryError``)."""
        tail = self.stderr.rstrip().rsplit("\n", 1)[-1]
        return tail.startswith("MemoryError")


_isolation: dict[str, NetworkIsolation] = {}
_isolation_lock = threading.Lock()


def network_isolation(python: str | None = None) -> NetworkIsolation:
    """How this machine keeps sandboxed code off the network, probed once per process.

    ``"namespace"``: ``unshare(CLONE_NEWNET)`` works (as root, or through a user
    namespace), so the program sees only a downed loopback and the audit hook
    is a second layer. ``"audit_hook"``: no namespace available; only the
    Python audit hook refuses sockets.
    """
    python = python or sys.executable
    with _isolation_lock:
        if python not in _isolation:
            try:
                probe = subprocess.run(
                    [python, "-I", "-P", _BOOTSTRAP, "--probe-network"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    env=_child_env(tempfile.gettempdir()),
                    check=False,
                )
                works = probe.returncode == 0 and probe.stdout.strip() == "ok"
            except (OSError, subprocess.TimeoutExpired):
                works = False
            _isolation[python] = "namespace" if works else "audit_hook"
        return _isolation[python]


def run_python(
    code: str,
    *,
    stdin: str | bytes | None = None,
    timeout: float = 10.0,
    memory_mb: int = 512,
    files: Mapping[str, str | bytes] | None = None,
    max_output_bytes: int = 1 << 20,
    max_file_mb: int = 64,
    python: str | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a fresh temp dir and return what happened.

    ``workdir`` runs it in that existing directory instead, which is kept
    afterwards: files the program writes stay for the next run (a per-rollout
    scratch dir that its owner removes).

    ``files`` are written into the temp dir first (relative paths only) and the
    dir is on ``sys.path``, so helper modules import. ``timeout`` is wall-clock
    seconds; CPU time is capped just above it. Each of stdout and stderr keeps
    at most ``max_output_bytes``; past that the program is killed and
    ``output_truncated`` is set. Blocks the calling thread: from async code use
    :func:`run_python_async`.

    Raises :class:`SandboxError` when the sandbox cannot start, and
    ``ValueError`` for a bad argument (an absolute or escaping file name).
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    if memory_mb < 32:
        raise ValueError(f"memory_mb must be at least 32 (the interpreter needs it), got {memory_mb!r}")
    isolation = network_isolation(python)
    own_dir = workdir is None
    workdir = tempfile.mkdtemp(prefix="benchmax-sandbox-") if workdir is None else os.path.realpath(workdir)
    try:
        _write_files(workdir, code, files or {})
        config = {
            "workdir": workdir,
            "main": _MAIN,
            "memory_mb": int(memory_mb),
            "cpu_seconds": math.ceil(timeout) + 1,
            "max_file_mb": int(max_file_mb),
            "network": isolation,
        }
        argv = [python or sys.executable, "-I", "-P", "-B", "-X", "utf8", _BOOTSTRAP, json.dumps(config)]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                argv,
                cwd=workdir,
                env=_child_env(workdir),
                stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not start {argv[0]!r}: {exc}") from exc
        out, err, timed_out, truncated = _communicate(
            process, data, started + timeout, max_output_bytes
        )
        duration = time.monotonic() - started
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    stderr = err.decode("utf-8", "replace")
    if process.returncode == _SETUP_FAILED and stderr.startswith("benchmax sandbox setup failed"):
        raise SandboxError(stderr.strip())
    return SandboxResult(
        stdout=out.decode("utf-8", "replace") + (_TRUNCATED if truncated == "stdout" else ""),
        stderr=stderr + (_TRUNCATED if truncated == "stderr" else ""),
        exit_code=process.returncode,
        timed_out=timed_out,
        output_truncated=truncated is not None,
        duration_s=duration,
        network_isolation=isolation,
    )


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


async def run_python_async(code: str, **options: object) -> SandboxResult:
    """:func:`run_python` on a small dedicated thread pool, off the event loop.

    The pool has one thread per CPU, which also bounds how many sandboxed
    programs compete for the CPUs at once. Log records keep their rollout.
    """
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="benchmax-sandbox"
            )
    context = contextvars.copy_context()
    call = functools.partial(context.run, run_python, code, **options)
    return await asyncio.get_running_loop().run_in_executor(_executor, call)


def _child_env(workdir: str) -> dict[str, str]:
    """A clean environment: nothing from ours (API keys stay out of model code's reach)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


def _write_files(workdir: str, code: str, files: Mapping[str, str | bytes]) -> None:
    root = Path(workdir)
    for name, content in files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ValueError(f"sandbox file name {name!r} must be a relative path inside the temp dir")
        if str(relative) == _MAIN:
            raise ValueError(f"sandbox file name {name!r} is reserved for the program itself")
        target = root.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    (root / _MAIN).write_text(code, encoding="utf-8")


def _communicate(
    process: subprocess.Popen[bytes], data: bytes | None, deadline: float, limit: int
) -> tuple[bytes, bytes, bool, str | None]:
    """Feed stdin, drain both pipes up to ``limit`` each, kill at the deadline."""
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    truncated: str | None = None
    timed_out = False
    pending = memoryview(data) if data else None
    with selectors.DefaultSelector() as selector:
        assert process.stdout is not None and process.stderr is not None
        selector.register(process.stdout, selectors.EVENT_READ, "stdout")
        selector.register(process.stderr, selectors.EVENT_READ, "stderr")
        if process.stdin is not None:
            os.set_blocking(process.stdin.fileno(), False)
            selector.register(process.stdin, selectors.EVENT_WRITE, "stdin")
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                if key.data == "stdin":
                    pending = _feed(selector, key.fileobj, pending)  # type: ignore[arg-type]
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.data]
                room = limit - len(buffer)
                buffer += chunk[:room]
                if len(chunk) > room:
                    truncated = key.data
            if truncated:
                break
    if timed_out or truncated:
        _kill_group(process)
    try:
        process.wait(max(0.0, deadline - time.monotonic()) + 1.0)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process)
        process.wait()
    _kill_group(process)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return bytes(buffers["stdout"]), bytes(buffers["stderr"]), timed_out, truncated


def _feed(selector: selectors.BaseSelector, stdin: object, pending: memoryview | None) -> memoryview | None:
    try:
        written = os.write(stdin.fileno(), pending[:_CHUNK]) if pending else 0  # type: ignore[attr-defined]
    except BrokenPipeError:
        pending = None
    else:
        pending = pending[written:] if pending is not None else None
    if not pending:
        selector.unregister(stdin)
        stdin.close()  # type: ignore[attr-defined]
        return None
    return pending


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the program and anything it spawned (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
