"""The Docker provider: a container per sandbox, through the ``docker`` SDK.

Works with any daemon that speaks Docker's API (Docker, Podman's
``podman system service``); ``DOCKER_HOST`` or ``base_url`` picks it. Each
container gets a read-only root, size-capped tmpfs at the workspace and
``/tmp``, no network (``network_mode="none"``), all capabilities dropped,
``no-new-privileges``, a memory and a PID cgroup limit, and runs commands as
uid 1000. Per-command limits (CPU time, address space, file size, descriptors)
are applied with the shell's ``ulimit``, so images need ``/bin/sh``.

Lifetime: the container's first process waits on its stdin, which this
process holds open through an attach connection; the daemon closes that stdin
when the connection drops (``StdinOnce``), also when benchmax is killed, and the
container then exits and is removed (``auto_remove``).

Timeouts: at a command's deadline (or output cap) its process tree is frozen
and killed, found through the parent pids in ``/proc/*/stat``; a daemon that
re-parented itself away is left to :meth:`terminate_processes` or ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import socket
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

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

_USER = "1000:1000"
_PID_DIR = "/tmp/.benchmax-exec"
_LABEL = "benchmax.sandbox"
_INSTALL = "pip install 'benchmax[docker]'"
_KEEPALIVE = "while read -r _; do :; done"
_KILL_TREE = (
    "kill_tree() { local p=$1; kill -STOP $p 2>/dev/null; for s in /proc/[0-9]*/stat; do "
    '{ read -r l < "$s"; } 2>/dev/null || continue; set -- ${l##*) }; '
    'if [ "$2" = "$p" ]; then c=${s#/proc/}; kill_tree ${c%/stat}; fi; done; kill -9 $p 2>/dev/null; };'
)
"""Freeze a process, kill its children (found by the parent pid in ``/proc/*/stat``), then kill it."""
# ulimit flags of POSIX sh (dash, busybox ash, bash): -t CPU s, -v KiB, -f 512-byte blocks, -n fds
_ULIMIT = (("cpu_seconds", "-t", 1), ("memory_mb", "-v", 1024), ("file_size_mb", "-f", 2048), ("open_files", "-n", 1))


class DockerProvider(SandboxProvider):
    """Containers as sandboxes. ``image`` is used when a spec names none."""

    name = "docker"

    def __init__(self, image: str | None = None, *, base_url: str | None = None, client: Any = None) -> None:
        self.image = image
        self._base_url = base_url
        self._client = client
        self._lock = threading.Lock()
        self._checked = False

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import docker
                except ImportError as exc:
                    raise SandboxUnavailable(f"the Docker provider needs the docker SDK: {_INSTALL}") from exc
                try:
                    self._client = docker.DockerClient(base_url=self._base_url) if self._base_url else docker.from_env()
                except Exception as exc:
                    raise SandboxUnavailable(_no_daemon(self._base_url, exc)) from exc
            return self._client

    def check(self) -> None:
        if self._checked:
            return
        client = self.client()
        try:
            client.ping()
        except Exception as exc:
            raise SandboxUnavailable(_no_daemon(self._base_url, exc)) from exc
        self._checked = True

    async def start(self, spec: SandboxSpec | None = None) -> DockerSandbox:
        spec = spec or SandboxSpec()
        if spec.forwards:
            raise SandboxError(
                "SandboxSpec.forwards (host loopback ports reachable from a network-less sandbox) is supported by "
                "the local provider only (BwrapProvider, BENCHMAX_SANDBOX=bwrap); a container's loopback is not the "
                "host's, and network=True would open the whole network instead"
            )
        image = spec.image or self.image
        if image is None:
            raise SandboxError(
                "the Docker provider needs an image: SandboxSpec(image=...) or DockerProvider(image=...)"
            )
        if spec.rootfs is not None:
            raise SandboxError("the Docker provider runs images, not a rootfs directory (SandboxSpec.rootfs)")
        await asyncio.to_thread(self.check)
        sandbox = await asyncio.to_thread(DockerSandbox._create, self.client(), image, spec)
        try:
            if spec.seed is not None:
                await sandbox.copy_in(spec.seed, spec.workdir)
        except BaseException:
            await sandbox.stop()
            raise
        return sandbox

    async def aclose(self) -> None:
        if self._client is not None:
            await asyncio.to_thread(self._client.close)


def _no_daemon(base_url: str | None, exc: BaseException) -> str:
    where = base_url or os.environ.get("DOCKER_HOST") or "the default socket"
    return (
        f"no Docker-compatible daemon answers at {where} ({type(exc).__name__}: {exc}). Start one "
        "(`dockerd`, or `podman system service --time=0` and DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock), "
        "or use the local provider (BENCHMAX_SANDBOX=bwrap)."
    )


class DockerSandbox(Sandbox):
    """One container; its id is the container's."""

    provider = "docker"

    def __init__(self, client: Any, container_id: str, spec: SandboxSpec, keepalive: Any) -> None:
        self.id = container_id[:12]
        self.container_id = container_id
        self.spec = spec
        self.python = spec.python or "python3"
        self._client = client
        self._keepalive = keepalive
        self._stopped = False
        self._env = {"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", **spec.env}

    @classmethod
    def _create(cls, client: Any, image: str, spec: SandboxSpec) -> DockerSandbox:
        from docker.types import Ulimit

        api = client.api
        limits = spec.limits
        host_config = api.create_host_config(
            auto_remove=True,
            init=True,  # a real PID 1 reaps what commands orphan; a shell would leave zombies that stall exec
            network_mode="bridge" if spec.network else "none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            tmpfs={
                spec.workdir: f"size={limits.disk_mb}m,uid=1000,gid=1000,mode=0755",
                "/tmp": f"size={limits.tmp_mb}m,uid=1000,gid=1000,mode=1777",
                **{d: f"size={limits.tmp_mb}m,uid=1000,gid=1000,mode=0755" for d in spec.writable_dirs},
            },
            mem_limit=f"{limits.memory_mb}m" if limits.memory_mb else None,
            pids_limit=limits.processes,
            ulimits=[Ulimit(name="core", soft=0, hard=0)],
            binds={str(m.source): {"bind": m.target, "mode": "ro"} for m in spec.mounts},
        )
        sandbox_id = uuid.uuid4().hex[:12]
        try:
            created = api.create_container(
                image,
                command=["/bin/sh", "-c", _KEEPALIVE],
                stdin_open=True,  # with detach=False the SDK also sets StdinOnce
                # the keepalive runs as root (no capabilities) and commands as uid 1000,
                # so `kill -9 -1` from a command cannot end the container under it
                working_dir=spec.workdir,
                environment={"BENCHMAX_SANDBOX_ID": sandbox_id},
                labels={_LABEL: sandbox_id, f"{_LABEL}.owner": str(os.getpid())},
                host_config=host_config,
            )
        except Exception as exc:
            raise SandboxError(f"could not create a container from {image!r}: {exc}") from exc
        container_id = created["Id"]
        try:
            keepalive = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
            api.start(container_id)
        except Exception as exc:
            with contextlib.suppress(Exception):
                api.remove_container(container_id, force=True)
            raise SandboxError(f"could not start a container from {image!r}: {exc}") from exc
        return cls(client, container_id, spec, keepalive)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _check_running(self) -> None:
        if self._stopped:
            raise SandboxError(f"sandbox {self.id} is stopped")

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
        self._check_running()
        if isinstance(command, str):
            if not command.strip():
                raise ValueError("command must not be empty")
            argv = ["/bin/sh", "-c", command]
        else:
            argv = list(command)
            if not argv or not all(isinstance(part, str) for part in argv):
                raise ValueError(f"command must be a non-empty list of strings, got {command!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        merged = self.spec.limits.merged(limits)
        return await asyncio.to_thread(
            self._exec_blocking, argv, self.path(cwd or self.workspace), {**self._env, **dict(env or {})},
            float(timeout), data, int(max_output_bytes), merged,
        )  # fmt: skip

    def _exec_blocking(
        self,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        timeout: float,
        data: bytes,
        limit: int,
        limits: Limits,
    ) -> ExecResult:
        api = self._client.api
        run_id = uuid.uuid4().hex
        pid_file = f"{_PID_DIR}/{run_id}"
        ulimits = " ".join(
            f"ulimit {flag} {int(value) * scale} 2>/dev/null;"
            for name, flag, scale in _ULIMIT
            if (value := getattr(limits, name)) is not None
        )
        script = f'mkdir -p {_PID_DIR}; echo $$ > {pid_file}; {ulimits} exec "$@"'
        wrapped = ["/bin/sh", "-c", script, "sh", *argv]
        started = time.monotonic()
        try:
            exec_id = api.exec_create(
                self.container_id, wrapped, stdin=bool(data), workdir=cwd, environment=env, user=_USER
            )["Id"]
            raw = api.exec_start(exec_id, socket=True)
        except Exception as exc:
            raise SandboxError(f"sandbox {self.id}: could not run {argv[0]!r}: {exc}") from exc
        sock: socket.socket = getattr(raw, "_sock", raw)
        try:
            if data:
                sock.sendall(data)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            out, err, timed_out, truncated = _read_frames(sock, started + timeout, limit)
            if timed_out or truncated:
                # Keep reading the stream to its end while the kill runs: the daemon
                # handles a command's exit only once its output is copied out, and a
                # stalled copy holds up the exits (and streams) of later commands.
                drain = threading.Thread(target=_read_frames, args=(sock, time.monotonic() + 15, 0), daemon=True)
                drain.start()
                self._kill_run(pid_file)
                drain.join()
            else:
                self._forget_run(pid_file)
        finally:
            with contextlib.suppress(Exception):
                raw.close()
        exit_code = self._exit_code(exec_id, timed_out or truncated)
        return ExecResult(
            exit_code=exit_code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            output_truncated=truncated,
            duration_s=time.monotonic() - started,
        )

    def _helper(self, script: str, timeout: float = 30.0) -> None:
        """Run a housekeeping shell snippet as the sandbox user, never waiting past ``timeout``."""
        api = self._client.api
        with contextlib.suppress(Exception):
            exec_id = api.exec_create(self.container_id, ["/bin/sh", "-c", script], user=_USER)["Id"]
            raw = api.exec_start(exec_id, socket=True)
            try:
                sock = getattr(raw, "_sock", raw)
                sock.shutdown(socket.SHUT_WR)
                _read_frames(sock, time.monotonic() + timeout, 65536)
            finally:
                raw.close()

    def _kill_run(self, pid_file: str) -> None:
        self._helper(f"{_KILL_TREE} p=$(cat {pid_file} 2>/dev/null) && kill_tree $p; rm -f {pid_file}")

    def _forget_run(self, pid_file: str) -> None:
        self._helper(f"rm -f {pid_file}")

    def _exit_code(self, exec_id: str, killed: bool) -> int:
        api = self._client.api
        deadline = time.monotonic() + 5
        while True:
            info = api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                if code is None:
                    return -9
                return -9 if killed and code in (137, -1) else (code - 256 if code > 255 else code)
            if time.monotonic() > deadline:
                return -9
            time.sleep(0.02)

    async def _shell(
        self, script: str, *args: str, stdin: bytes = b"", limit: int = DEFAULT_OUTPUT_BYTES
    ) -> ExecResult:
        """A file helper as a command (``sh -c script sh args``): the root is read-only and the
        daemon's archive API cannot see tmpfs mounts, so files move through ``cat`` and ``tar``."""
        return await self.exec(["/bin/sh", "-c", script, "sh", *args], stdin=stdin, timeout=600, max_output_bytes=limit)

    @staticmethod
    def _raise_for(result: ExecResult, path: str) -> None:
        if result.exit_code == 0 and not result.output_truncated:
            return
        if "Read-only file system" in result.stderr:
            raise OSError(30, "Read-only file system", path)
        if "Permission denied" in result.stderr:
            raise PermissionError(13, "Permission denied", path)
        codes = {2: (2, "No such file or directory"), 20: (20, "Not a directory"), 21: (21, "Is a directory")}
        if result.exit_code in codes:
            raise OSError(*codes[result.exit_code], path)
        raise SandboxError(f"file operation on {path} failed: {result.stderr.strip() or result.exit_code}")

    async def read_file(self, path: str, *, max_bytes: int = DEFAULT_READ_BYTES) -> bytes:
        self._check_running()
        target = self.path(path)
        script = '[ -e "$1" ] || exit 2; [ -d "$1" ] && exit 21; exec cat -- "$1"'
        code, out, err, truncated = await asyncio.to_thread(
            self._exec_bytes, ["/bin/sh", "-c", script, "sh", target], max_bytes
        )
        if truncated:
            raise ValueError(f"{path} is more than the {max_bytes} bytes allowed")
        self._raise_for(ExecResult(code, "", err.decode("utf-8", "replace")), path)
        return out

    async def _tar_of(self, target: str, limit: int) -> bytes:
        """A tar of ``target`` (a file, or a directory's contents), as raw bytes."""
        result = await asyncio.to_thread(
            self._exec_bytes,
            ["/bin/sh", "-c", '[ -e "$1" ] || exit 2; if [ -d "$1" ]; then cd "$1" && exec tar -cf - .; '
             'else cd "$(dirname "$1")" && exec tar -cf - "$(basename "$1")"; fi', "sh", target],
            limit,
        )  # fmt: skip
        code, out, err, truncated = result
        if truncated:
            raise ValueError(f"{target} is more than the {limit} bytes allowed")
        if code != 0:
            self._raise_for(ExecResult(code, "", err.decode("utf-8", "replace")), target)
        return out

    def _exec_bytes(self, argv: list[str], limit: int) -> tuple[int, bytes, bytes, bool]:
        api = self._client.api
        exec_id = api.exec_create(self.container_id, argv, workdir=self.workspace, user=_USER)["Id"]
        raw = api.exec_start(exec_id, socket=True)
        sock = getattr(raw, "_sock", raw)
        try:
            sock.shutdown(socket.SHUT_WR)
            out, err, timed_out, truncated = _read_frames(sock, time.monotonic() + 600, limit)
            if truncated or timed_out:
                _read_frames(sock, time.monotonic() + 15, 0)
        finally:
            with contextlib.suppress(Exception):
                raw.close()
        return self._exit_code(exec_id, False), out, err, truncated

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        self._check_running()
        target = self.path(path)
        content = data.encode() if isinstance(data, str) else bytes(data)
        result = await self._shell(
            'd=$(dirname "$1") && mkdir -p "$d" && cat > "$1" && chmod "$2" "$1"', target, f"{mode:o}", stdin=content
        )
        self._raise_for(result, path)

    async def list_files(self, path: str = ".", *, recursive: bool = False) -> list[FileInfo]:
        self._check_running()
        target = self.path(path)
        check = await self._shell('[ -e "$1" ] || exit 2; [ -d "$1" ] || exit 20', target)
        self._raise_for(check, path)
        archive = await self._tar_of(target, 1 << 30)
        entries = []
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                parts = parts[1:] if parts and parts[0] == "." else parts
                if not parts or (not recursive and len(parts) > 1):
                    continue
                kind = (
                    "dir" if member.isdir() else "file" if member.isfile() else "symlink" if member.issym() else "other"
                )
                entries.append(FileInfo("/".join(parts), kind, member.size, member.mode & 0o7777))
        return sorted(entries, key=lambda entry: entry.path)

    async def copy_in(self, source: str | os.PathLike[str], path: str) -> None:
        self._check_running()
        source_path = Path(os.fspath(source))
        if not source_path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(source_path))
        if not source_path.is_dir():
            await self.write_file(path, source_path.read_bytes(), mode=source_path.stat().st_mode & 0o777)
            return
        archive = await asyncio.to_thread(tar_directory, source_path)
        result = await self._shell(
            'mkdir -p "$1" && exec tar -xf - -C "$1" --no-same-owner', self.path(path), stdin=archive
        )
        self._raise_for(result, path)

    async def copy_out(self, path: str, destination: str | os.PathLike[str]) -> None:
        self._check_running()
        source = self.path(path)
        archive = await self._tar_of(source, 1 << 30)
        await asyncio.to_thread(untar, _without_dot(archive), Path(os.fspath(destination)), source)

    async def terminate_processes(self) -> None:
        self._check_running()
        await asyncio.to_thread(self._terminate)

    def _terminate(self) -> None:
        self._helper("kill -9 -1")

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await asyncio.to_thread(self._remove)

    def _remove(self) -> None:
        with contextlib.suppress(Exception):
            self._keepalive.close()
        with contextlib.suppress(Exception):
            self._client.api.remove_container(self.container_id, v=True, force=True)


def _without_dot(archive: bytes) -> bytes:
    """``tar -cf - .`` names members ``./x``; drop the ``./`` and the ``.`` entry itself."""
    buffer = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as source,
        tarfile.open(fileobj=buffer, mode="w:") as target,
    ):
        for member in source:
            parts = PurePosixPath(member.name).parts
            parts = parts[1:] if parts and parts[0] == "." else parts
            if not parts:
                continue
            member.name = "/".join(parts)
            target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return buffer.getvalue()


def _read_frames(sock: socket.socket, deadline: float, limit: int) -> tuple[bytes, bytes, bool, bool]:
    """Docker's multiplexed exec stream: 8-byte headers (stream, size), stdout=1, stderr=2."""
    buffers = {1: bytearray(), 2: bytearray()}
    pending = b""
    truncated = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(buffers[1]), bytes(buffers[2]), True, truncated
        ready, _, _ = select.select([sock], [], [], min(remaining, 1.0))
        if not ready:
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(buffers[1]), bytes(buffers[2]), False, truncated
        pending += chunk
        while len(pending) >= 8:
            stream, size = pending[0], int.from_bytes(pending[4:8], "big")
            if len(pending) < 8 + size:
                break
            payload, pending = pending[8 : 8 + size], pending[8 + size :]
            buffer = buffers.get(stream)
            if buffer is None:
                continue
            room = limit - len(buffer)
            buffer += payload[: max(room, 0)]
            if len(payload) > room:
                truncated = True
        if truncated and limit:
            return bytes(buffers[1]), bytes(buffers[2]), False, True
