"""A fast OpenAI-compatible fake model server for benchmarks, in a process of its own.

The test server in ``benchmax.testing`` is built for fidelity and fault drills
(aiohttp, scripts, fault injection); at thousands of requests per second its own
CPU would be what a benchmark measures. This one is a bare ``asyncio.Protocol``
speaking HTTP/1.1 with keep-alive (on uvloop when installed), answering from a
fixed tool policy, so one core serves tens of thousands of requests per second
and the driver under test stays the bottleneck.

Policy, by how many assistant messages the request already holds:

* turn 0: one ``add`` tool call, with the two numbers of ``What is A + B?`` in
  the last user message;
* turn 1 and later: a final answer, the content of the last tool message.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /stats``
(counters as JSON) and ``POST /stats/reset``. ``--latency-ms`` delays every
completion (a timer, not a sleep per connection). On SIGINT/SIGTERM the counters
are printed as one JSON line on stdout. The first stdout line is
``listening on http://HOST:PORT/v1``.

    python bench/fake_server.py --port 0 --latency-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import time
from typing import Any

import orjson

_MAX_HEADER = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_ADD = re.compile(rb"(-?\d+)\s*\+\s*(-?\d+)")
_REASONS = {
    200: b"OK",
    100: b"Continue",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    413: b"Payload Too Large",
}


class Stats:
    """Request counters, readable over ``GET /stats`` while the server runs."""

    def __init__(self) -> None:
        self.started = time.time()
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.completions = 0
        self.tool_calls = 0
        self.final_answers = 0
        self.bad_requests = 0
        self.connections_total = 0
        self.connections_peak = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.reset_at = time.time()

    def snapshot(self, open_connections: int) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "completions": self.completions,
            "tool_calls": self.tool_calls,
            "final_answers": self.final_answers,
            "bad_requests": self.bad_requests,
            "connections_open": open_connections,
            "connections_total": self.connections_total,
            "connections_peak": self.connections_peak,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "seconds": round(time.time() - self.reset_at, 3),
        }


class FakeModel:
    """Builds completion bodies from the scripted tool policy."""

    def __init__(self, stats: Stats, model: str = "fake") -> None:
        self.stats = stats
        self.model = model
        self._ids = 0

    def complete(self, body: dict[str, Any]) -> bytes:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ValueError("'messages' must be a list")
        self._ids += 1
        turn = 0
        last_user = ""
        last_tool: object = ""
        for message in messages:
            role = message.get("role") if isinstance(message, dict) else None
            if role == "assistant":
                turn += 1
            elif role == "user":
                last_user = message.get("content") or ""
            elif role == "tool":
                last_tool = message.get("content")
        if turn == 0:
            match = _ADD.search(last_user.encode() if isinstance(last_user, str) else b"")
            a, b = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
            message_out: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self._ids}",
                        "type": "function",
                        "function": {"name": "add", "arguments": f'{{"a": {a}, "b": {b}}}'},
                    }
                ],
            }
            finish = "tool_calls"
            self.stats.tool_calls += 1
        else:
            text = last_tool if isinstance(last_tool, str) else orjson.dumps(last_tool).decode()
            message_out = {"role": "assistant", "content": text}
            finish = "stop"
            self.stats.final_answers += 1
        self.stats.completions += 1
        return orjson.dumps(
            {
                "id": f"chatcmpl-{self._ids}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or self.model,
                "choices": [{"index": 0, "message": message_out, "finish_reason": finish}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
            }
        )


class _Request:
    __slots__ = ("body", "close", "method", "path")

    def __init__(self, method: bytes, path: bytes, body: bytes, close: bool) -> None:
        self.method = method
        self.path = path
        self.body = body
        self.close = close


class HttpProtocol(asyncio.Protocol):
    """One keep-alive connection: parses requests as bytes arrive, answers in order."""

    def __init__(self, server: FakeServer) -> None:
        self._server = server
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        server = self._server
        server.open_connections += 1
        server.stats.connections_total += 1
        server.stats.connections_peak = max(server.stats.connections_peak, server.open_connections)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.open_connections -= 1
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._server.stats.bytes_in += len(data)
        self._buffer += data
        while not self._closing:
            try:
                request = self._parse()
            except _BadRequest as exc:
                self._server.stats.bad_requests += 1
                self._write(exc.status, orjson.dumps({"error": {"message": str(exc)}}), close=True)
                return
            if request is None:
                return
            self._server.handle(self, request)

    def _parse(self) -> _Request | None:
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > _MAX_HEADER:
                raise _BadRequest(400, "request headers too large")
            return None
        head = bytes(buffer[:end]).split(b"\r\n")
        try:
            method, path, version = head[0].split(b" ")
        except ValueError:
            raise _BadRequest(400, "malformed request line") from None
        length = 0
        chunked = False
        connection = b""
        expect = False
        for line in head[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise _BadRequest(400, "malformed header line")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise _BadRequest(400, "bad Content-Length") from None
                if length < 0 or length > _MAX_BODY:
                    raise _BadRequest(413, "body too large")
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                connection = value.strip().lower()
            elif name == b"expect":
                expect = value.strip().lower() == b"100-continue"
        start = end + 4
        if chunked:
            parsed = _dechunk(buffer, start)
            if parsed is None:
                return None
            body, consumed = parsed
        else:
            if len(buffer) - start < length:
                if expect and self._transport is not None:
                    self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                return None
            body = bytes(buffer[start : start + length])
            consumed = start + length
        del buffer[:consumed]
        close = connection == b"close" or (version == b"HTTP/1.0" and connection != b"keep-alive")
        return _Request(method, path.split(b"?", 1)[0], body, close)

    def reply(self, body: bytes, close: bool) -> None:
        """A 200 with ``body``; the latency timer's callback."""
        self._write(200, body, close=close)

    def _write(self, status: int, body: bytes, *, close: bool = False) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        head = (
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
            % (
                status,
                _REASONS.get(status, b"Error"),
                len(body),
                b"Connection: close\r\n" if close else b"",
            )
        )
        self._server.stats.bytes_out += len(head) + len(body)
        transport.write(head + body)
        if close:
            self._closing = True
            transport.close()


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _dechunk(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    """The body of a chunked request and the bytes it spans, or None until it is whole."""
    body = bytearray()
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[position:line_end]).split(b";", 1)[0], 16)
        except ValueError:
            raise _BadRequest(400, "bad chunk size") from None
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n\r\n", position - 2)
            if trailer_end < 0:
                return None
            return bytes(body), trailer_end + 4
        if len(buffer) < position + size + 2:
            return None
        body += buffer[position : position + size]
        if len(body) > _MAX_BODY:
            raise _BadRequest(413, "body too large")
        position += size + 2


class FakeServer:
    def __init__(self, *, latency: float = 0.0, model: str = "fake") -> None:
        self.latency = latency
        self.stats = Stats()
        self.model = FakeModel(self.stats, model)
        self.open_connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle(self, protocol: HttpProtocol, request: _Request) -> None:
        self.stats.requests += 1
        if request.path.endswith(b"/chat/completions"):
            if request.method != b"POST":
                protocol._write(405, b'{"error":{"message":"use POST"}}', close=request.close)
                return
            try:
                body = orjson.loads(request.body)
                if not isinstance(body, dict):
                    raise ValueError("body must be a JSON object")
                reply = self.model.complete(body)
            except (orjson.JSONDecodeError, ValueError, AttributeError) as exc:
                self.stats.bad_requests += 1
                error = orjson.dumps({"error": {"message": f"bad request: {exc}"}})
                protocol._write(400, error, close=request.close)
                return
            if self.latency > 0:
                assert self._loop is not None
                self._loop.call_later(self.latency, protocol.reply, reply, request.close)
            else:
                protocol._write(200, reply, close=request.close)
        elif request.path.endswith(b"/models"):
            models = {"object": "list", "data": [{"id": self.model.model, "object": "model"}]}
            protocol._write(200, orjson.dumps(models), close=request.close)
        elif request.path == b"/stats/reset" and request.method == b"POST":
            self.stats.reset()
            protocol._write(200, b"{}", close=request.close)
        elif request.path == b"/stats":
            body = orjson.dumps(self.stats.snapshot(self.open_connections))
            protocol._write(200, body, close=request.close)
        else:
            protocol._write(404, b'{"error":{"message":"not found"}}', close=request.close)

    async def serve(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        server = await loop.create_server(
            lambda: HttpProtocol(self), host, port, backlog=8192, reuse_address=True
        )
        bound = server.sockets[0].getsockname()[1]
        print(f"listening on http://{host}:{bound}/v1", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()
        print(orjson.dumps({"stats": self.stats.snapshot(self.open_connections)}).decode(), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fast OpenAI-compatible fake model server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay per completion")
    parser.add_argument("--model", default="fake")
    parser.add_argument("--no-uvloop", action="store_true", help="use the stdlib event loop")
    args = parser.parse_args(argv)
    server = FakeServer(latency=args.latency_ms / 1000.0, model=args.model)
    runner = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            print("uvloop not installed; using the stdlib loop", file=sys.stderr)
    runner(server.serve(args.host, args.port))


if __name__ == "__main__":
    main()
