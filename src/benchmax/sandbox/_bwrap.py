"""The local provider: a bubblewrap sandbox per start, supervised by an agent inside it.

Layers, each enforced by the kernel:

- **Filesystem**: a fresh root that shows the host's system directories
  (``/usr``, ``/etc``, the ``/bin``/``/lib`` links) and the interpreter's
  installation read-only, or a prepared rootfs; nothing else of the host (no
  home, no ``/tmp``, no ``/run`` sockets, no other sandbox). The only writable
  places are the workspace and ``/tmp``, each a tmpfs of a fixed size (the disk
  cap), and a small ``/dev/shm``; the rest is remounted read-only.
- **Namespaces**: user, PID, IPC, UTS, cgroup and (unless ``network=True``)
  network; further user namespaces are disabled. ``SandboxSpec.forwards`` keeps the
  empty network namespace and carries its own loopback ports, one connection at a
  time, to fixed host loopback ports (``_forward.py``). A process inside sees only its
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
import contextlib
import logging
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmax.sandbox import _seccomp
from benchmax.sandbox._base import SandboxProvider
from benchmax.sandbox._bwrap_host import (
    _MIB,
    _SYSTEM_DIRS,
    INSTALL_HINT,
    _base_env,
    _bundled_libs,
    _bwrap_features,
    _python_prefixes,
    _readable_by_others,
    _start_failure,
    find_bwrap,
)
from benchmax.sandbox._bwrap_sandbox import BwrapSandbox
from benchmax.sandbox._errors import SandboxError, SandboxUnavailable
from benchmax.sandbox._forward import ForwardRelay
from benchmax.sandbox._spec import SandboxSpec

logger = logging.getLogger("benchmax.sandbox")

_HERE = Path(__file__).resolve().parent
_AGENT_SOURCE = (_HERE / "_agent.py").read_text(encoding="utf-8")
_LAUNCHER_SOURCE = (_HERE / "_launcher.py").read_text(encoding="utf-8")
_SANDBOX_UID = 1000
_NOBODY = 65534
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ROOTFS_SKIP = frozenset({"proc", "dev", "sys", "tmp", "run", "workspace"})


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
        inside = [channel_inside.fileno(), log_inside.fileno()]
        forward = forward_inside = None
        forward_args: list[str] = []
        if spec.forwards:
            # Connections accepted inside come back on this pair as descriptors (see _forward.py).
            forward, forward_inside = socket.socketpair()
            inside.append(forward_inside.fileno())
            forward_args = [str(forward_inside.fileno()), ",".join(str(f.port) for f in spec.forwards)]
        process: asyncio.subprocess.Process | None = None
        try:
            argv, pass_fds, cleanup = self._command(spec, [*agent, _AGENT_SOURCE, *map(str, inside[:2]), *forward_args])
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
                if forward_inside is not None:
                    forward_inside.close()
            reader, writer = await asyncio.open_connection(sock=channel)
            log_reader, _ = await asyncio.open_connection(sock=log)
            relay = ForwardRelay(forward, spec.forwards, f"sandbox-{sandbox_id}") if forward is not None else None
        except BaseException:
            channel.close()
            log.close()
            if forward is not None:
                forward.close()
            if process is not None:  # started, then cancelled before it was a sandbox: end it here, on this loop
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await process.wait()
            raise
        sandbox = BwrapSandbox(spec, sandbox_id, process, self._python(spec), reader, writer, log_reader, relay)
        try:
            await sandbox._wait_ready(self.bwrap)
            if spec.seed is not None:
                await sandbox.copy_in(spec.seed, spec.workdir)
        except BaseException:
            await sandbox.stop()
            raise
        return sandbox
