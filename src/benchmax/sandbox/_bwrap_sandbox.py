"""One running bubblewrap sandbox: the host's side of the channel to the agent inside it.

Requests go out framed (two 4-byte sizes, a JSON header, a payload); replies are bounded
before anything is read: a header past ``_MAX_JSON`` or a payload past what its request
allows ends the sandbox with a protocol error.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.sandbox._base import (
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_READ_BYTES,
    DEFAULT_TIMEOUT,
    Sandbox,
)
from benchmax.sandbox._bwrap_host import _MIB, _base_env, _start_failure
from benchmax.sandbox._errors import SandboxEnded, SandboxError
from benchmax.sandbox._forward import ForwardRelay
from benchmax.sandbox._spec import ExecResult, FileInfo, Limits, SandboxSpec
from benchmax.sandbox._tar import tar_directory, untar

_HEADER_SIZE = 8
_STDERR_KEEP = 16384
_MAX_JSON = 64 * _MIB
"""The largest reply header (JSON) the host reads; the agent never sends more (a listing says so)."""
_MESSAGE_ROOM = 65536
"""Payload room past a command's two capped streams (the agent's own "cannot run" message)."""
_ANSWER_GRACE = 30.0
"""Seconds past a command's own timeout before a silent agent counts as broken."""
_START_TIMEOUT = 60.0

_live: weakref.WeakSet[BwrapSandbox] = weakref.WeakSet()


@atexit.register
def _kill_live_sandboxes() -> None:
    """A normal interpreter exit stops what its owners did not (SIGKILL is covered by the kernel)."""
    for sandbox in list(_live):
        sandbox._kill()


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
        forward: ForwardRelay | None = None,
    ) -> None:
        self.id = sandbox_id
        self.spec = spec
        self.python = python
        self._process = process
        self._channel_reader = reader
        self._channel = writer
        self._log = log
        self._forward = forward
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

    @property
    def forwarded_connections(self) -> int:
        """Connections open now through the sandbox's forwarded ports (``SandboxSpec.forwards``)."""
        return self._forward.connections if self._forward is not None else 0

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
        ended_under_us = self._ready.done() and not self._stopped
        error = (SandboxEnded if ended_under_us else SandboxError)(f"sandbox {self.id} {self._ended}{detail}")
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved: nobody may be waiting any more
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        if self._forward is not None:
            self._forward.close()
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
        if self._forward is not None:
            await self._forward.aclose()
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
