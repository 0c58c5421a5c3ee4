"""A scripted OpenAI-compatible chat server for tests, demos and fault drills.

Each conversation can carry its own script: a line ``#script: [...]`` in any
prompt message holds a JSON list of steps, and step *n* answers the request
that already has *n* assistant messages. Without a script a policy callable (by
default an echo) answers. Steps::

    {"content": "42"}                                  final answer
    {"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}
    {"content": "...", "finish_reason": "length"}
    {"error": "context"}                               400 context_length_exceeded
    {"status": 400, "message": "bad"}                  plain HTTP error
    {"status": 400, "body": {...}}                     HTTP error with this exact JSON body
    {"status": 200, "body": b"..."}                    these exact bytes (a policy's raw reply)
    {"status": 200, "body": b"...", "headers": {"Content-Encoding": "gzip"}}
                                                       with these headers (bytes compressed
                                                       by the policy: a gzip bomb)
    {"fail": {"status": 503, "times": 2, "retry_after": 0}, "content": "ok"}
    {"fail": {"status": 503, "message": "overloaded"}, ...}   the error's message
    {"fail": {"malformed": true, "times": 1}, ...}     broken JSON body first
    {"fail": {"body": {"error": "x"}, "times": 1}, ...}  this JSON body (status 200 unless given) first
    {"fail": {"reset": true, "times": 1}, ...}         connection dropped first
    {"fail": {"truncated": true, "times": 1}, ...}     body cut short of its Content-Length
    {"fail": {"hang": 30, "times": 1}, ...}            no reply for 30 s (then a 500)
    {"sleep": 1.5, "content": "slow"}                  delay before answering
    {"content": "hi", "usage": {"prompt_tokens": 900, "completion_tokens": 3, "cached_tokens": 512}}
                                                       this usage (cached_tokens goes to
                                                       prompt_tokens_details, as OpenAI sends it;
                                                       total_tokens, when given, as given)

A request with ``"stream": true`` gets the reply as server-sent events (role,
content, tool calls, finish, usage when ``stream_options.include_usage``, ``[DONE]``).

Without a ``usage`` step the usage counts a quarter token per character of the
prompt's text and of the answer (at least 1 each).

``/v1/embeddings`` answers every input with a deterministic unit-free vector
(``embedding_dims`` numbers derived from the text's SHA-256), so vector search
code can be exercised offline; like chat requests, embedding requests and
their headers are logged.

Server-wide quirks, for the gateways and servers benchmax meets (defaults: none):
``models`` are the ids ``GET /v1/models`` lists (``None``: no such route, as
aiohttp answers unknown routes); ``models_status`` answers that route with this
status and an HTML error page instead (404, 405, 501 as proxies and minimal
servers do), after ``models_delay`` seconds (a route that hangs); ``fail_first``
answers the first chat requests with these statuses (an HTML gateway page each:
``(503,)`` is one transient outage blip).

It runs on loopback in a thread of its own (``with ScriptedServer() as s``) or
as a process: ``python -m benchmax.testing --port 8000``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from aiohttp import web

Policy = Callable[[dict[str, Any]], Mapping[str, Any]]
_SCRIPT = re.compile(r"#script:\s*(\[.*\])\s*$", re.MULTILINE | re.DOTALL)


def echo_policy(body: dict[str, Any]) -> dict[str, Any]:
    """Answer with the last message's text."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content")
    return {"content": f"echo: {content if isinstance(content, str) else ''}"}


def find_script(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and "#script:" in content:
            match = _SCRIPT.search(content)
            if match:
                return orjson.loads(match.group(1))
    return None


def embed_text(text: str, dims: int = 8) -> list[float]:
    """The scripted server's embedding of ``text``: ``dims`` numbers in [-1, 1) from its SHA-256."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    while len(digest) < dims:
        digest += hashlib.sha256(digest).digest()
    return [round(byte / 128 - 1, 6) for byte in digest[:dims]]


class ScriptedServer:
    """The server, its request log and its fault counters."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token_ids: bool = False,
        keep_requests: int = 10_000,
        embedding_dims: int = 8,
        models: Sequence[str] | None = ("scripted",),
        models_status: int | None = None,
        models_delay: float = 0.0,
        fail_first: Sequence[int] = (),
    ) -> None:
        self.policy = policy or echo_policy
        self.models = tuple(models) if models is not None else None
        self.models_status = models_status
        self.models_delay = models_delay
        self.fail_first = tuple(fail_first)
        self.host = host
        self.port = port
        self.token_ids = token_ids
        self.keep_requests = keep_requests
        self.embedding_dims = embedding_dims
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        """Chat requests being answered now, and the most at once so far: what a concurrency bound
        of the client side lets through, counted where the requests arrive."""
        self._attempts: Counter[str] = Counter()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        if self.models is not None:
            app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        return app

    async def start(self) -> None:
        # Scripted replies may sleep for minutes; stopping must not wait for them.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def __enter__(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._serve, name="scripted-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start within 10s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        loop.run_until_complete(self.start())
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.stop())
            # Hung handlers (a "hang" fault) outlive the shutdown timeout; end them quietly.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _models(self, request: web.Request) -> web.Response:
        self.counts["models"] += 1
        if self.models_delay:
            await asyncio.sleep(self.models_delay)
        if self.models_status is not None:
            return _html_error(self.models_status)
        assert self.models is not None
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"} for name in self.models]})

    async def _embeddings(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON")
        self.counts["embeddings"] += 1
        if len(self.requests) < self.keep_requests:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(text, str) for text in inputs):
            return _error(400, "input must be a string or a list of strings")
        data = [
            {"object": "embedding", "index": index, "embedding": embed_text(text, self.embedding_dims)}
            for index, text in enumerate(inputs)
        ]
        usage = {"prompt_tokens": sum(len(text) // 4 + 1 for text in inputs), "total_tokens": 0}
        payload = {"object": "list", "data": data, "model": body.get("model", "scripted"), "usage": usage}
        return web.Response(body=orjson.dumps(payload), content_type="application/json")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON")
        self.counts["requests"] += 1
        if len(self.requests) < self.keep_requests:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
        if self.counts["requests"] <= len(self.fail_first):
            status = self.fail_first[self.counts["requests"] - 1]
            self.counts[f"status_{status}"] += 1
            return _html_error(status)
        messages = body.get("messages") or []
        turn = sum(1 for message in messages if message.get("role") == "assistant")
        script = find_script(messages)
        if script is not None:
            step = dict(script[turn]) if turn < len(script) else {"content": "(script ended)"}
        else:
            step = dict(self.policy(body))
        fail = step.get("fail")
        if fail:
            key = hashlib.sha1(orjson.dumps(messages)).hexdigest()
            self._attempts[key] += 1
            if self._attempts[key] <= int(fail.get("times", 1)):
                return await self._fault(request, fail)
        if step.get("sleep"):
            await asyncio.sleep(float(step["sleep"]))
        if step.get("error") == "context":
            self.counts["context_errors"] += 1
            return _error(
                400,
                "This model's maximum context length is 2048 tokens.",
                code="context_length_exceeded",
            )
        if "status" in step:
            self.counts[f"status_{step['status']}"] += 1
            if "body" in step:
                return web.Response(
                    status=int(step["status"]),
                    body=step["body"] if isinstance(step["body"], bytes) else orjson.dumps(step["body"]),
                    content_type="application/json",
                    headers=step.get("headers"),
                )
            return _error(int(step["status"]), str(step.get("message", "scripted error")))
        completion = self._completion(body, step)
        if body.get("stream") is True:
            return await _streamed(request, completion, body.get("stream_options"))
        return web.Response(body=completion, content_type="application/json")

    async def _fault(self, request: web.Request, fail: Mapping[str, Any]) -> web.StreamResponse:
        if "body" in fail:
            self.counts["fault_bodies"] += 1
            return web.json_response(fail["body"], status=int(fail.get("status", 200)))
        if fail.get("malformed"):
            self.counts["malformed"] += 1
            return web.Response(body=b'{"choices": [', content_type="application/json")
        if fail.get("reset"):
            self.counts["resets"] += 1
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if fail.get("truncated"):
            self.counts["truncated"] += 1
            return await _truncated(request)
        if fail.get("hang"):
            self.counts["hangs"] += 1
            await asyncio.sleep(float(fail["hang"]))
        status = int(fail.get("status", 500))
        self.counts[f"status_{status}"] += 1
        headers = {}
        if "retry_after" in fail:
            headers["Retry-After"] = str(fail["retry_after"])
        return _error(status, str(fail.get("message", "scripted fault")), headers=headers)

    def _completion(self, body: dict[str, Any], step: Mapping[str, Any]) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
        calls = step.get("tool_calls")
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id", f"call_{index}"),
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call.get("arguments"), str)
                        else orjson.dumps(call.get("arguments", {})).decode(),
                    },
                }
                for index, call in enumerate(calls)
            ]
            if step.get("content") is None:
                message["content"] = None
        finish = step.get("finish_reason") or ("tool_calls" if calls else "stop")
        text = message.get("content") or ""
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        completion_tokens = max(1, len(text) // 4)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        scripted = step.get("usage") if isinstance(step.get("usage"), Mapping) else {}
        prompt_tokens = int(scripted.get("prompt_tokens", max(1, prompt_chars // 4)))
        completion_tokens = int(scripted.get("completion_tokens", completion_tokens))
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": int(scripted.get("total_tokens", prompt_tokens + completion_tokens)),
        }
        if "cached_tokens" in scripted:
            usage["prompt_tokens_details"] = {"cached_tokens": int(scripted["cached_tokens"])}
        data: dict[str, Any] = {
            "id": f"chatcmpl-{self.counts['requests']}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [choice],
            "usage": usage,
        }
        if self.token_ids:
            data["prompt_token_ids"] = [ord(c) % 256 for c in str(body.get("messages"))][:64]
            choice["token_ids"] = [ord(c) % 256 for c in text] or [0]
            choice["logprobs"] = {
                "content": [{"token": c, "logprob": -0.5} for c in (text or " ")]
            }
        return orjson.dumps(data)


async def _streamed(request: web.Request, completion: bytes, options: Any) -> web.StreamResponse:
    """The reply as server-sent events, as OpenAI streams one: role, content, tool calls, finish, usage, DONE."""
    data = orjson.loads(completion)
    choice = data["choices"][0]
    message = choice["message"]
    head = {"id": data["id"], "object": "chat.completion.chunk", "created": data["created"], "model": data["model"]}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    events = [event({"role": "assistant", "content": ""})]
    if message.get("content"):
        events.append(event({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(event({"tool_calls": [{"index": index, **call}]}))
    events.append(event({}, choice["finish_reason"]))
    if isinstance(options, Mapping) and options.get("include_usage"):
        events.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": data["usage"]}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for chunk in events:
        await response.write(chunk)
    await response.write_eof()
    return response


async def _truncated(request: web.Request) -> web.StreamResponse:
    """Promise more body than is sent, then close: a stream cut off mid-reply."""
    partial = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "cut sh'
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(partial) * 4
    await response.prepare(request)
    await response.write(partial)
    if request.transport is not None:
        request.transport.close()
    return response


def _html_error(status: int) -> web.Response:
    """An error page as nginx and most proxies send it: HTML, many lines, no JSON."""
    title = f"{status} {_REASONS.get(status, 'Error')}"
    page = (
        "<!DOCTYPE html>\n<html>\n<head><title>" + title + "</title></head>\n<body>\n"
        "<center><h1>" + title + "</h1></center>\n<hr><center>nginx/1.25.3</center>\n"
        + "<!-- a padding comment, as error pages carry -->\n" * 20
        + "</body>\n</html>\n"
    )
    return web.Response(status=status, text=page, content_type="text/html")


_REASONS = {
    404: "Not Found",
    405: "Not Allowed",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Temporarily Unavailable",
    504: "Gateway Time-out",
}


def _error(
    status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    payload = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return web.Response(
        status=status, body=orjson.dumps(payload), content_type="application/json", headers=headers
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token-ids", action="store_true")
    parser.add_argument("--model", action="append", help="an id GET /v1/models lists (repeat for several)")
    parser.add_argument("--no-models", action="store_true", help="serve no GET /v1/models route")
    parser.add_argument("--models-status", type=int, help="answer GET /v1/models with this status and an HTML page")
    parser.add_argument("--fail-first", type=int, action="append", default=[], help="answer a first chat request so")
    args = parser.parse_args()
    server = ScriptedServer(
        host=args.host,
        port=args.port,
        token_ids=args.token_ids,
        models=None if args.no_models else (args.model or ("scripted",)),
        models_status=args.models_status,
        fail_first=args.fail_first,
    )
    web.run_app(server.app(), host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
