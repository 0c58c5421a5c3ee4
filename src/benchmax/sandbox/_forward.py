"""The host's end of a local sandbox's forwarded ports (``SandboxSpec.forwards``).

The sandbox keeps its empty network namespace. Its agent listens on the sandbox's
own ``127.0.0.1:<port>`` and hands each accepted connection, as a descriptor
(``SCM_RIGHTS``), to this side over a socket pair only the agent holds; one byte
with it names the forward. Here each connection is joined to the forward's host
loopback port. So the sandbox never gets a host socket, a path or an address: what
crosses is a byte stream to one fixed endpoint, opened by the host.

Bounded: each direction of a connection holds at most ``_BUFFER`` bytes here (the
next read waits for the write), a forward carries at most its ``max_connections``
at once (one past it is closed on arrival), and :meth:`ForwardRelay.aclose` ends
every connection with the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
import os
import socket

from benchmax.sandbox._spec import PortForward

logger = logging.getLogger("benchmax.sandbox")

_BUFFER = 65536
"""Bytes one direction of one connection holds on the host at a time."""
_CONNECT_TIMEOUT = 10.0
_MAX_FDS = 4
"""Descriptors room in one receive: the agent sends one; extra ones (never sent by it) are closed."""


class ForwardRelay:
    """Joins the connections a sandbox's agent hands over to the forwards' host ports."""

    def __init__(self, sock: socket.socket, forwards: tuple[PortForward, ...], name: str) -> None:
        self._sock = sock
        self._forwards = forwards
        self._name = name
        self._active = [0] * len(forwards)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._closed = False
        self.refused = 0
        """Connections closed on arrival: over a forward's cap, or not a stream socket."""
        self._loop = asyncio.get_running_loop()
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._receive)
        self._reading = True

    @property
    def connections(self) -> int:
        """Connections open through this sandbox's forwards now."""
        return len(self._tasks)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())

    def _receive(self) -> None:
        while not self._closed:
            try:
                data, fds, _, _ = socket.recv_fds(self._sock, 1, _MAX_FDS)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._stop_reading()
                return
            if not data and not fds:
                self._stop_reading()  # the agent is gone; the sandbox's own reader settles it
                return
            for extra in fds[1:]:
                os.close(extra)
            if fds:
                self._accept(data[0] if data else -1, fds[0])

    def _accept(self, index: int, fd: int) -> None:
        if not 0 <= index < len(self._forwards) or self._active[index] >= self._forwards[index].max_connections:
            os.close(fd)
            self.refused += 1
            return
        try:
            inside = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            self.refused += 1
            return
        if inside.type != socket.SOCK_STREAM:
            inside.close()
            self.refused += 1
            return
        inside.setblocking(False)
        self._active[index] += 1
        task = self._loop.create_task(
            self._relay(self._forwards[index], inside), name=f"{self._name}-forward-{next(self._ids)}"
        )
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            # Here, not in the coroutine: a task cancelled before its first step never runs its finally.
            inside.close()
            self._active[index] -= 1
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.warning("%s: a forwarded connection failed: %r", self._name, finished.exception())

        task.add_done_callback(done)

    async def _relay(self, forward: PortForward, inside: socket.socket) -> None:
        assert forward.host_port is not None
        family = socket.AF_INET6 if ipaddress.ip_address(forward.host).version == 6 else socket.AF_INET
        outside = socket.socket(family, socket.SOCK_STREAM)
        try:
            outside.setblocking(False)
            try:
                async with asyncio.timeout(_CONNECT_TIMEOUT):
                    await self._loop.sock_connect(outside, (forward.host, forward.host_port))
            except (OSError, TimeoutError):
                return  # nothing answers there: the program inside sees its connection closed
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._pump(inside, outside))
                    group.create_task(self._pump(outside, inside))
            except* OSError:
                pass  # a reset on either side ends both
        finally:
            outside.close()

    async def _pump(self, source: socket.socket, target: socket.socket) -> None:
        while data := await self._loop.sock_recv(source, _BUFFER):
            await self._loop.sock_sendall(target, data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop taking connections and cancel every open one (their sockets close as they end)."""
        if self._closed:
            return
        self._closed = True
        self._stop_reading()
        self._sock.close()
        for task in list(self._tasks):
            task.cancel()

    async def aclose(self) -> None:
        """:meth:`close`, then wait until every connection's sockets are closed."""
        self.close()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
