"""The weaker, opt-in fallback (``BENCHMAX_SANDBOX=guard``): Python programs under a guard rail.

Not a security boundary. Each program runs as a subprocess of benchmax in the
sandbox's host temp dir with a scrubbed environment, rlimits (memory, CPU time,
file size, open files), an empty network namespace where the kernel allows one,
and a PEP 578 audit hook that refuses subprocesses, sockets and file access
outside the temp dir through Python's own APIs. Code written to escape goes
around the hook (``ctypes`` reaches libc directly), so this is only for
machines without bubblewrap or Docker, and only when asked for by name.

It runs Python programs only: :func:`benchmax.sandbox.run_python` knows how to
use it, and every other command is refused, so a shell-using env cannot run
on it by accident.
"""

from __future__ import annotations

import asyncio
import contextlib
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
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from benchmax.sandbox._base import DEFAULT_OUTPUT_BYTES, DEFAULT_READ_BYTES, DEFAULT_TIMEOUT, Sandbox, SandboxProvider
from benchmax.sandbox._errors import SandboxError
from benchmax.sandbox._spec import ExecResult, FileInfo, Limits, SandboxSpec

NetworkIsolation = Literal["namespace", "audit_hook"]

_BOOTSTRAP = str(Path(__file__).with_name("_bootstrap.py"))
_SETUP_FAILED = 125
_CHUNK = 65536

_isolation: dict[str, NetworkIsolation] = {}
_isolation_lock = threading.Lock()


def network_isolation(python: str | None = None) -> NetworkIsolation:
    """How the guard keeps programs off the network here, probed once per interpreter.

    ``"namespace"``: ``unshare(CLONE_NEWNET)`` works, so the program sees only a
    downed loopback. ``"audit_hook"``: only the audit hook refuses sockets.
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


class GuardProvider(SandboxProvider):
    """Temp-dir "sandboxes" for Python programs only; see the module docstring for what that is not."""

    name = "guard"

    def check(self) -> None:
        return None

    async def start(self, spec: SandboxSpec | None = None) -> GuardSandbox:
        spec = spec or SandboxSpec()
        if spec.image is not None or spec.rootfs is not None or spec.mounts or spec.network or spec.writable_dirs:
            raise SandboxError(
                "the guard fallback supports no image, rootfs, mounts, network or extra writable dirs; "
                "use the bwrap or docker provider"
            )
        if spec.forwards:
            raise SandboxError(
                "the guard fallback supports no SandboxSpec.forwards (it has no network namespace to forward "
                "into); use the bwrap provider"
            )
        sandbox = GuardSandbox(spec)
        if spec.seed is not None:
            await sandbox.copy_in(spec.seed, spec.workdir)
        return sandbox


class GuardSandbox(Sandbox):
    """A host temp dir standing in for the workspace; paths outside it are refused."""

    provider = "guard"

    def __init__(self, spec: SandboxSpec) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.spec = spec
        self.python = spec.python or sys.executable
        self.root = Path(tempfile.mkdtemp(prefix="benchmax-guard-")).resolve()
        self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def host(self, path: str) -> Path:
        """The host path behind a sandbox path; only the workspace exists."""
        if self._stopped:
            raise SandboxError(f"sandbox {self.id} is stopped")
        relative = PurePosixPath(self.path(path)).relative_to("/")
        workspace = PurePosixPath(self.workspace).relative_to("/")
        try:
            inside = relative.relative_to(workspace)
        except ValueError:
            raise PermissionError(13, "outside the guard sandbox's workspace", path) from None
        if ".." in inside.parts:
            raise PermissionError(13, "'..' is not allowed in guard sandbox paths", path)
        return self.root.joinpath(*inside.parts)

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
        raise SandboxError(
            "the guard fallback (BENCHMAX_SANDBOX=guard) runs only Python programs through run_python; "
            "install bubblewrap or use Docker for commands"
        )

    async def run_program(
        self, main: str, *, stdin: bytes | None, timeout: float, limits: Limits, max_output_bytes: int
    ) -> ExecResult:
        """Run ``main`` (relative to the workspace) under the guard rail."""
        return await asyncio.to_thread(
            _run_guarded, self.python, str(self.root), main, stdin, timeout, limits, max_output_bytes
        )

    async def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_BYTES) -> bytes:
        target = self.host(path)
        if target.stat().st_size > max_bytes:
            raise ValueError(f"{path} is larger than the {max_bytes} bytes allowed")
        return target.read_bytes()

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        target = self.host(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        target.chmod(mode)

    async def list_files(self, path: str = ".", *, recursive: bool = False) -> list[FileInfo]:
        root = self.host(path)
        found = root.rglob("*") if recursive else root.iterdir()
        entries = []
        for entry in found:
            info = entry.lstat()
            kind = (
                "symlink" if entry.is_symlink() else "dir" if entry.is_dir() else "file" if entry.is_file() else "other"
            )
            entries.append(FileInfo(str(entry.relative_to(root)), kind, info.st_size, info.st_mode & 0o7777))
        return sorted(entries, key=lambda item: item.path)

    async def copy_in(self, source: str | os.PathLike[str], path: str) -> None:
        source_path, target = Path(os.fspath(source)), self.host(path)
        if source_path.is_dir():
            shutil.copytree(source_path, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_path, target)

    async def copy_out(self, path: str, destination: str | os.PathLike[str]) -> None:
        source, target = self.host(path), Path(os.fspath(destination))
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)

    async def terminate_processes(self) -> None:
        return None  # each program's process group is killed when it ends

    async def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            shutil.rmtree(self.root, ignore_errors=True)


def _run_guarded(
    python: str,
    workdir: str,
    main: str,
    stdin: bytes | None,
    timeout: float,
    limits: Limits,
    max_output_bytes: int,
) -> ExecResult:
    config = {
        "workdir": workdir,
        "main": main,
        "memory_mb": int(limits.memory_mb or 4096),
        "cpu_seconds": int(limits.cpu_seconds or math.ceil(timeout) + 1),
        "max_file_mb": int(limits.file_size_mb or 1024),
        "network": network_isolation(python),
        "parent": os.getpid(),
    }
    argv = [python, "-I", "-P", "-B", "-X", "utf8", _BOOTSTRAP, json.dumps(config)]
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv,
            cwd=workdir,
            env=_child_env(workdir),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise SandboxError(f"could not start {argv[0]!r}: {exc}") from exc
    out, err, timed_out, truncated = _communicate(process, stdin, started + timeout, max_output_bytes)
    stderr = err.decode("utf-8", "replace")
    if process.returncode == _SETUP_FAILED and stderr.startswith("benchmax sandbox setup failed"):
        raise SandboxError(stderr.strip())
    return ExecResult(
        exit_code=process.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        timed_out=timed_out,
        output_truncated=truncated,
        duration_s=time.monotonic() - started,
    )


def _child_env(workdir: str) -> dict[str, str]:
    """A clean environment: nothing from ours (API keys stay out of model code's reach)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


def _communicate(
    process: subprocess.Popen[bytes], data: bytes | None, deadline: float, limit: int
) -> tuple[bytes, bytes, bool, bool]:
    """Feed stdin, drain both pipes up to ``limit`` each, kill at the deadline."""
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = False
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
                buffer += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated = True
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
