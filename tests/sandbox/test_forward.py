"""Forwarded ports: a network-less local sandbox reaching one host loopback endpoint, and nothing else.

Real parts only: an aiohttp server (or benchmax's scripted OpenAI-compatible server) on
the host's loopback, a real bubblewrap sandbox whose commands make real connections to
their own ``127.0.0.1``. ``.ci/run`` runs this file again as a fresh non-root uid (it
runs every file of tests/sandbox but the Docker one that way).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from benchmax.sandbox import (
    DockerProvider,
    GuardProvider,
    PortForward,
    Sandbox,
    SandboxError,
    SandboxSpec,
)
from benchmax.testing import ScriptedServer

SERVER_PROBE = textwrap.dedent(
    """
    import sys, urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}{sys.argv[2]}", timeout=30) as answer:
        sys.stdout.write(answer.read().decode())
    """
)


class HostServer:
    """An aiohttp server on the host's loopback whose handlers the tests steer."""

    def __init__(self) -> None:
        self.port = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.all_in = asyncio.Event()
        self.expected = 0
        self.release = asyncio.Event()
        self.streaming = asyncio.Event()
        self.stream_closed = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_get("/hello/{name}", self._hello)
        app.router.add_get("/together/{n}", self._together)
        app.router.add_post("/echo", self._echo)
        app.router.add_get("/held", self._held)
        app.router.add_get("/stream", self._stream)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _hello(self, request: web.Request) -> web.Response:
        return web.Response(text=f"hello {request.match_info['name']} from the host")

    async def _together(self, request: web.Request) -> web.Response:
        """Answers once ``expected`` requests are in at the same time: proof they were concurrent."""
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight >= self.expected:
            self.all_in.set()
        try:
            await asyncio.wait_for(self.all_in.wait(), 120)
        finally:
            self.in_flight -= 1
        return web.Response(text=f"answer {request.match_info['n']}")

    async def _echo(self, request: web.Request) -> web.Response:
        return web.Response(body=(await request.read())[::-1])

    async def _held(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first\n")
        await self.release.wait()
        return response

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        sent = 0
        try:
            while True:
                await response.write(b"x" * 4096)
                sent += 1
                if sent == 16:
                    self.streaming.set()
                await asyncio.sleep(0.005)  # pacing the stream, not waiting for anything
        finally:
            self.stream_closed.set()


@pytest.fixture
async def server() -> AsyncIterator[HostServer]:
    host = HostServer()
    await host.start()
    yield host
    await host.stop()


async def _eventually(check: Callable[[], bool], what: str, bound: float = 60.0) -> None:
    """Wait for ``check`` (a bound, not a pace: it returns as soon as ``check`` holds)."""
    deadline = time.monotonic() + bound
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound:g} s: {what}")
        await asyncio.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _forward_tasks(sandbox: Sandbox) -> list[asyncio.Task[object]]:
    return [task for task in asyncio.all_tasks() if task.get_name().startswith(f"sandbox-{sandbox.id}-forward")]


@pytest.mark.parametrize("same_port", [True, False], ids=["same-port", "other-port-inside"])
async def test_a_command_reaches_the_forwarded_host_server(start, server: HostServer, same_port: bool) -> None:
    inside = server.port if same_port else _free_port()
    forward = PortForward(inside, host_port=server.port)
    sandbox = await start(SandboxSpec(forwards=(forward,)))
    result = await sandbox.exec([sys.executable, "-c", SERVER_PROBE, str(inside), "/hello/sandbox"])
    assert result.ok, result
    assert result.stdout == "hello sandbox from the host"


async def test_nothing_else_is_reachable(start, server: HostServer) -> None:
    """Another host loopback port, the forwarded port on another address, outside addresses and DNS: all fail."""
    other = socket.create_server(("127.0.0.1", 0))
    other.setblocking(False)
    other_port = other.getsockname()[1]
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port),)))
    probe = textwrap.dedent(
        f"""
        import json, socket
        def attempt(address, family=socket.AF_INET):
            try:
                with socket.socket(family, socket.SOCK_STREAM) as s:
                    s.settimeout(10)
                    s.connect(address)
                    return "connected"
            except OSError as e:
                return type(e).__name__
        try:
            socket.getaddrinfo("example.com", 80)
            dns = "resolved"
        except OSError as e:
            dns = type(e).__name__
        print(json.dumps({{
            "forwarded": attempt(("127.0.0.1", {server.port})),
            "other host port": attempt(("127.0.0.1", {other_port})),
            "forwarded port on ::1": attempt(("::1", {server.port}), socket.AF_INET6),
            "forwarded port on 127.0.0.2": attempt(("127.0.0.2", {server.port})),
            "outside": attempt(("192.0.2.1", 80)),
            "outside resolver": attempt(("8.8.8.8", 53)),
            "dns": dns,
        }}))
        """
    )
    result = await sandbox.exec([sys.executable, "-c", probe])
    assert result.ok, result
    outcome = json.loads(result.stdout)
    assert outcome.pop("forwarded") == "connected"
    assert outcome.pop("dns") != "resolved"
    assert outcome["other host port"] == "ConnectionRefusedError", outcome
    for name, what in outcome.items():
        assert what != "connected", f"{name} was reachable from inside the sandbox: {outcome}"
    with pytest.raises(BlockingIOError):
        other.accept()  # nothing reached the other host port
    other.close()


async def test_many_concurrent_connections(start, server: HostServer) -> None:
    count = 40
    server.expected = count
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port),)))
    program = textwrap.dedent(
        f"""
        import concurrent.futures, urllib.request
        def fetch(n):
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/together/{{n}}", timeout=120) as answer:
                return answer.read().decode()
        with concurrent.futures.ThreadPoolExecutor({count}) as pool:
            print("\\n".join(pool.map(fetch, range({count}))))
        """
    )
    result = await sandbox.exec([sys.executable, "-c", program], timeout=150)
    assert result.ok, result
    assert result.stdout.splitlines() == [f"answer {n}" for n in range(count)]
    assert server.most_in_flight == count


async def test_large_bodies_cross_both_ways(start, server: HostServer) -> None:
    """Far past the relay's 64 KiB per direction: it streams, it does not hold a body."""
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port),)))
    program = textwrap.dedent(
        f"""
        import hashlib, os, urllib.request
        body = os.urandom(8 << 20)
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}/echo", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=120) as answer:
            back = answer.read()
        print(len(back), back == body[::-1])
        """
    )
    result = await sandbox.exec([sys.executable, "-c", program], timeout=150)
    assert result.ok, result
    assert result.stdout.split() == [str(8 << 20), "True"]


async def test_connections_over_the_cap_are_closed_on_arrival(start, server: HostServer) -> None:
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port, max_connections=2),)))
    program = textwrap.dedent(
        f"""
        import socket
        def held():
            s = socket.create_connection(("127.0.0.1", {server.port}), timeout=60)
            s.sendall(b"GET /held HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            seen = b""
            while b"first" not in seen:
                chunk = s.recv(4096)
                assert chunk, "a held connection closed"
                seen += chunk
            return s
        kept = [held(), held()]
        extra = socket.create_connection(("127.0.0.1", {server.port}), timeout=60)
        try:
            extra.sendall(b"GET /held HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            print("third:", extra.recv(4096) or "closed")
        except OSError as error:
            print("third:", type(error).__name__)
        """
    )
    result = await sandbox.exec([sys.executable, "-c", program], timeout=120)
    assert result.ok, result
    assert result.stdout.strip() in ("third: closed", "third: ConnectionResetError", "third: BrokenPipeError"), result
    server.release.set()  # the held answers end: so do their relays, and their slots are free again
    await _eventually(lambda: sandbox.forwarded_connections == 0, "the relays end with their connections")
    again = await sandbox.exec([sys.executable, "-c", SERVER_PROBE, str(server.port), "/hello/again"])
    assert again.ok and again.stdout == "hello again from the host", again


async def test_a_forward_to_a_closed_host_port_closes_the_connection(start) -> None:
    port = _free_port()
    sandbox = await start(SandboxSpec(forwards=(PortForward(port),)))
    program = textwrap.dedent(
        f"""
        import socket
        s = socket.create_connection(("127.0.0.1", {port}), timeout=60)
        try:
            s.sendall(b"hello")
            print(s.recv(100) or "closed")
        except OSError as error:
            print(type(error).__name__)
        """
    )
    result = await sandbox.exec([sys.executable, "-c", program])
    assert result.ok, result
    assert result.stdout.strip() in ("closed", "ConnectionResetError", "BrokenPipeError")
    assert (await sandbox.exec(["echo", "still here"])).stdout == "still here\n"


async def test_stopping_mid_stream_closes_every_connection_task_and_descriptor(bwrap, server: HostServer) -> None:
    before = _open_fds()
    sandbox = await bwrap.start(SandboxSpec(forwards=(PortForward(server.port),)))
    program = textwrap.dedent(
        f"""
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stream", timeout=300) as answer:
            while answer.read(4096):
                pass
        """
    )
    running = asyncio.create_task(sandbox.exec([sys.executable, "-c", program], timeout=300))
    try:
        await asyncio.wait_for(server.streaming.wait(), 120)
        assert sandbox.forwarded_connections == 1
        assert len(_forward_tasks(sandbox)) == 1
    finally:
        await sandbox.stop()
    with pytest.raises(SandboxError):
        await running
    await asyncio.wait_for(server.stream_closed.wait(), 60)
    assert sandbox.forwarded_connections == 0
    assert _forward_tasks(sandbox) == []
    with pytest.raises(ProcessLookupError):
        os.kill(sandbox.pid, 0)
    await _eventually(lambda: _open_fds() <= before, "every descriptor the sandbox and its relays held is closed")


async def test_a_sandbox_whose_supervisor_dies_closes_its_relays(start, server: HostServer) -> None:
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port),)))
    program = textwrap.dedent(
        f"""
        import os, signal, urllib.request
        answer = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stream", timeout=300)
        answer.read(4096)
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) not in (1, os.getpid()):
                try:
                    os.kill(int(pid), signal.SIGKILL)  # the supervisor runs as this same uid
                except OSError:
                    pass
        while answer.read(4096):
            pass
        """
    )
    with contextlib.suppress(SandboxError):
        await sandbox.exec([sys.executable, "-c", program], timeout=120)
    await asyncio.wait_for(server.stream_closed.wait(), 60)
    await _eventually(lambda: sandbox.stopped and not _forward_tasks(sandbox), "the relays end with the sandbox")


async def test_no_process_a_command_can_see_holds_the_forward_socket(start, server: HostServer) -> None:
    """As for the channel (test_channel.py): only the non-dumpable supervisor holds the forward's sockets."""
    sandbox = await start(SandboxSpec(forwards=(PortForward(server.port),)))
    listing = await sandbox.exec(
        [sys.executable, "-c", "import os\nfor p in os.listdir('/proc'):\n if p.isdigit() and int(p) != os.getpid():\n"
         "  try: print(p, sorted(os.readlink(f'/proc/{p}/fd/{f}') for f in os.listdir(f'/proc/{p}/fd')))\n"
         "  except OSError as e: print(p, 'refused', e.errno)\n"]
    )  # fmt: skip
    assert listing.exit_code == 0, listing
    assert "socket:" not in listing.stdout, listing.stdout
    lines = dict(line.split(" ", 1) for line in listing.stdout.splitlines())
    assert lines["2"].startswith("refused"), "the supervisor is not dumpable"


async def test_the_openai_sdk_inside_talks_to_a_scripted_server_on_the_host(start) -> None:
    pytest.importorskip("openai", reason="the openai SDK is not installed in the test interpreter")
    scripted = ScriptedServer()
    await scripted.start()
    try:
        sandbox = await start(SandboxSpec(forwards=(PortForward(scripted.port),)))
        program = textwrap.dedent(
            f"""
            import openai
            client = openai.OpenAI(base_url="http://127.0.0.1:{scripted.port}/v1", api_key="rollout-key", max_retries=0)
            messages = [{{"role": "user", "content": "hi from the sandbox"}}]
            answer = client.chat.completions.create(model="scripted", messages=messages)
            print(answer.choices[0].message.content)
            print([model.id for model in client.models.list()])
            """
        )
        result = await sandbox.exec([sys.executable, "-c", program], timeout=120)
    finally:
        await scripted.stop()
    assert result.ok, result
    assert result.stdout.splitlines() == ["echo: hi from the sandbox", "['scripted']"]
    assert scripted.requests[0]["messages"] == [{"role": "user", "content": "hi from the sandbox"}]
    assert scripted.headers[0].get("Authorization") == "Bearer rollout-key"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PortForward(80), "cannot listen below 1024"),
        (lambda: PortForward(8080, host="10.0.0.1"), "loopback"),
        (lambda: PortForward(8080, host="localhost"), "loopback"),
        (lambda: PortForward(8080, host_port=0), "host_port"),
        (lambda: PortForward(8080, max_connections=0), "max_connections"),
        (lambda: SandboxSpec(forwards=(PortForward(8080), PortForward(8080, host_port=90))), "port once"),
        (lambda: SandboxSpec(network=True, forwards=(PortForward(8080),)), "network=True"),
        (lambda: SandboxSpec(forwards=(8080,)), "PortForward"),
    ],
    ids=["privileged-port", "outside-host", "host-name", "host-port", "cap", "duplicate", "with-network", "bare-int"],
)
def test_bad_forwards_are_refused_with_the_field(make: Callable[[], object], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


@pytest.mark.parametrize(
    "start_with",
    [
        lambda spec: DockerProvider(image="any").start(spec),
        lambda spec: GuardProvider().start(spec),
    ],
    ids=["docker", "guard"],
)
async def test_other_providers_refuse_forwards_clearly(start_with: Callable[[SandboxSpec], Awaitable[Sandbox]]) -> None:
    with pytest.raises(SandboxError, match="forwards"):
        await start_with(SandboxSpec(forwards=(PortForward(8080),)))
