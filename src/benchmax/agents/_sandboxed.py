"""An agent command in a bubblewrap sandbox whose one way out is the recording proxy.

The sandbox has a network namespace of its own (only its own loopback), so the
proxy's TCP port on the host is out of its reach. The way through is a Unix
socket: benchmax serves one in a fresh host directory and forwards each
connection to the proxy; the directory is bound read-only into the sandbox (a
socket stays connectable on a read-only mount), and a small relay inside,
started before the agent, listens on the sandbox's own loopback and forwards
to that socket. The agent sees an ordinary ``OPENAI_BASE_URL`` on 127.0.0.1 and
can reach nothing else: no other host port, no outside network.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmax.agents._run import AgentRun, bounded, log_line
from benchmax.envs import RolloutFailure, TerminationReason
from benchmax.proxy import ProxyLease
from benchmax.sandbox import BwrapProvider, Mount, SandboxError, SandboxSpec

SOCKET_DIR = "/run/benchmax"
_SOCKET_NAME = "proxy.sock"
_RELAY = r"""
import asyncio, os, sys

SOCK, PATH, ARGV = sys.argv[1], sys.argv[2], sys.argv[3:]


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except Exception:
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(SOCK)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = dict(os.environ)
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:%d%s" % (port, PATH)
    try:
        process = await asyncio.create_subprocess_exec(*ARGV, env=env)
    except OSError as exc:
        sys.stderr.write("cannot start the agent command %r: %s\n" % (ARGV[0], exc))
        return 127
    code = await process.wait()
    server.close()
    return code


code = asyncio.run(main())
sys.exit(code if code >= 0 else 128 - code)
"""


class SandboxBridge:
    """A Unix socket on the host forwarding every connection to the proxy's loopback port."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="benchmax-agent-"))
        self.directory.chmod(0o755)
        self._server: asyncio.base_events.Server | None = None
        self._target: tuple[str, int] | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / _SOCKET_NAME

    async def serve(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        target = (parts.hostname or "127.0.0.1", parts.port or 80)
        if self._server is not None:
            if target != self._target:
                raise RolloutFailure(
                    TerminationReason.SANDBOX_ERROR,
                    f"one sandbox bridge serves one proxy ({self._target}), asked for {target}",
                )
            return
        self._target = target
        self._server = await asyncio.start_unix_server(self._handle, path=str(self.socket_path))
        os.chmod(self.socket_path, 0o777)  # the sandbox's user (uid 1000, or nobody) must connect

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._target is not None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        shutil.rmtree(self.directory, ignore_errors=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65_536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def sandbox_spec(sandbox: Any, bridge: SandboxBridge) -> SandboxSpec:
    """The author's spec (or the default one), with the bridge's directory bound in and no network."""
    spec = sandbox if isinstance(sandbox, SandboxSpec) else SandboxSpec()
    if spec.network:
        raise RolloutFailure(
            TerminationReason.SANDBOX_ERROR,
            "an agent's sandbox must not have network=True: its only way out is the recording proxy",
        )
    return replace(spec, mounts=(*spec.mounts, Mount(bridge.directory, SOCKET_DIR)))


async def run_in_sandbox(
    sandbox: Any,
    bridge: SandboxBridge,
    argv: Sequence[str],
    stdin: bytes,
    lease: ProxyLease,
    extra_env: Mapping[str, str],
    *,
    timeout: float,
    max_answer: int,
    max_stderr: int,
) -> AgentRun:
    """Run ``argv`` in a fresh sandbox behind the relay; stdout is the answer, stderr lines are logged."""
    spec = sandbox_spec(sandbox, bridge)
    path = urlsplit(lease.base_url).path
    relay = [sys.executable, "-I", "-c", _RELAY, f"{SOCKET_DIR}/{_SOCKET_NAME}", path, *argv]
    env = {**extra_env, "OPENAI_API_KEY": lease.api_key, "BENCHMAX_ROLLOUT_ID": lease.rollout_id}
    try:
        async with BwrapProvider().sandbox(spec) as box:
            result = await box.exec(
                relay, env=env, timeout=timeout, stdin=stdin, max_output_bytes=max(max_answer * 4, max_stderr * 4)
            )
    except SandboxError as exc:
        raise RolloutFailure(TerminationReason.SANDBOX_ERROR, f"the agent's sandbox failed: {exc}") from exc
    for line in result.stderr.splitlines():
        log_line(line.encode("utf-8", "replace"))
    tail = result.stderr[-max_stderr:]
    answer = bounded(result.stdout.strip(), max_answer)
    if result.timed_out:
        return AgentRun(
            "timeout", error=f"the agent command ran past its {timeout:g}s limit and was killed", stderr_tail=tail
        )
    if result.exit_code != 0:
        detail = f": {bounded(tail.strip(), 2_000)}" if tail.strip() else " (no stderr)"
        return AgentRun(
            "error",
            answer=answer,
            error=f"the agent command exited with status {result.exit_code} in its sandbox{detail}",
            stderr_tail=tail,
            exit_code=result.exit_code,
        )
    return AgentRun("ok", answer=answer, stderr_tail=tail, exit_code=0)
