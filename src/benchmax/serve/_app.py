"""The HTTP face of a served env: benchmax's REST sessions, OpenEnv's endpoints and its WebSocket.

Every body is JSON, read up to ``max_request_bytes`` and checked here, at the
boundary: a bad one is answered 4xx with ``{"error": {"code", "message"}}``
naming the field. Calls into env code are answered 200 even when the env code
raised: its error is the answer (see :mod:`benchmax.remote.wire`). The access
rule is the one the inspector uses too (:class:`benchmax.access.AccessGuard`:
loopback only, a token for what runs env code, no page at another origin),
applied to WebSockets too. A POST must say its body is JSON: a web page can send a
cross-origin form or ``no-cors`` ``text/plain`` POST without asking, never an
``application/json`` one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from benchmax.access import AccessGuard, credential_of
from benchmax.envs import DatasetError, validate_max_examples
from benchmax.remote import wire
from benchmax.serve import _openenv
from benchmax.serve._service import EnvService
from benchmax.serve._sessions import SessionError

logger = logging.getLogger("benchmax.serve")
_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
Handler = Callable[[Request], Awaitable[Response]]


def json_response(body: Mapping[str, Any], status: int = 200) -> Response:
    try:
        content = orjson.dumps(body, option=_JSON_OPTIONS)
    except TypeError as exc:  # env data that JSON cannot carry (a payload of objects)
        status = 500
        content = orjson.dumps(wire.error_body(wire.ErrorCode.INVALID_RESULT, f"the answer is not JSON: {exc}"))
    return Response(content, status_code=status, media_type="application/json")


def error_response(code: wire.ErrorCode | str, message: str, status: int) -> Response:
    return json_response(wire.error_body(code, message), status)


def create_app(
    service: EnvService,
    *,
    token: str | None = None,
    token_for_reads: bool = True,
    allowed_origins: Iterable[str] = (),
    on_shutdown: Iterable[Callable[[], None]] = (),
) -> AccessGuard:
    """The ASGI app serving ``service``; its lifespan starts the TTL reaper and, on shutdown,
    exits every open session's context and closes the env.

    ``token`` guards every request, or with ``token_for_reads=False`` only those that run
    env code (sessions, tools, rewards, ``/ws``); ``allowed_origins`` are the web pages,
    besides the server's own origin, that may call it. ``on_shutdown`` runs last in the
    lifespan's shutdown (uvicorn re-raises SIGTERM once it has shut down, so code after
    ``Server.run`` does not run then).
    """
    at_shutdown = list(on_shutdown)
    limit = service.config.max_request_bytes

    async def read_json(request: Request) -> Any:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise wire.WireError(
                f"the body is {length} bytes; the limit is {limit} (--max-request-bytes)", wire.ErrorCode.TOO_LARGE
            )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise wire.WireError(
                    f"the body is over the {limit}-byte limit (--max-request-bytes)", wire.ErrorCode.TOO_LARGE
                )
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw:
            return {}
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise wire.WireError(f"the body is not JSON: {exc}") from None

    async def read_object(request: Request) -> Mapping[str, Any]:
        body = await read_json(request)
        if not isinstance(body, Mapping):
            raise wire.WireError(f"the body must be a JSON object, got {type(body).__name__}")
        return body

    def endpoint(handler: Handler) -> Handler:
        """Protocol errors become 4xx JSON answers; a server bug a 500 that says so."""

        async def wrapped(request: Request) -> Response:
            try:
                if request.method == "POST":
                    _check_json_media_type(request.headers.get("content-type"))
                return await handler(request)
            except wire.WireError as exc:
                status = _STATUS.get(exc.code, 400)
                if exc.code == wire.ErrorCode.INVALID_RESULT:
                    status = 500
                return error_response(exc.code, str(exc), status)
            except SessionError as exc:
                return error_response(exc.code, str(exc), exc.status)
            except DatasetError as exc:
                return error_response(wire.ErrorCode.DATASET_ERROR, str(exc), 422)
            except ClientDisconnect:
                return Response(status_code=499)
            except Exception as exc:
                logger.exception("%s %s failed", request.method, request.url.path)
                return error_response(wire.ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}", 500)

        return wrapped

    async def until_disconnect(request: Request, call: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
        """The call's answer, or ``None`` when the client hung up first (the call is cancelled then)."""
        task = asyncio.ensure_future(call)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None

    @endpoint
    async def health(request: Request) -> Response:
        return json_response({"status": "healthy"})

    @endpoint
    async def metadata(request: Request) -> Response:
        info = service.info()
        doc = (type(service.env).__doc__ or "").strip()
        return json_response(
            {
                "name": info["env"]["name"],
                "description": doc.splitlines()[0] if doc else f"{info['env']['class']}, served by benchmax",
                "readme_content": None,
                "version": info["benchmax"],
                "author": None,
                "documentation_url": None,
            }
        )

    @endpoint
    async def schema(request: Request) -> Response:
        return json_response(_openenv.SCHEMAS)

    @endpoint
    async def info(request: Request) -> Response:
        return json_response(service.info())

    @endpoint
    async def tools(request: Request) -> Response:
        return json_response({"tools": await service.tools()})

    @endpoint
    async def dataset(request: Request) -> Response:
        split = wire.split_from(request.path_params["split"], "the split")
        query = request.query_params
        offset = _count(query.get("offset", "0"), "offset", minimum=0)
        page = _count(query.get("limit", "256"), "limit", minimum=1)
        cap = query.get("max_examples")
        max_examples = validate_max_examples(_count(cap, "max_examples", minimum=1)) if cap is not None else None
        return json_response(await service.page(split, offset, page, max_examples))

    @endpoint
    async def open_session(request: Request) -> Response:
        body = await read_object(request)
        rollout_id = body.get("rollout_id")
        if rollout_id is not None and (not isinstance(rollout_id, str) or not rollout_id.strip()):
            raise wire.WireError("rollout_id must be a non-empty string when given")
        if "example" in body:
            example = wire.example_from(body["example"], "example")
        else:
            split = wire.split_from(body.get("split", "train"), "split")
            index, example_id = body.get("index"), body.get("example_id")
            if (index is None) == (example_id is None):
                raise wire.WireError("give example {id, payload}, or split with one of index or example_id")
            if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
                raise wire.WireError("index must be an integer >= 0")
            if example_id is not None and not isinstance(example_id, str):
                raise wire.WireError("example_id must be a string")
            example = await service.example(split, index=index, example_id=example_id)
        _, answer = await service.open(rollout_id, example, client=credential_of(request.scope))
        return json_response(answer)

    @endpoint
    async def session_state(request: Request) -> Response:
        return json_response(service.sessions.touch(request.path_params["session_id"]).state())

    @endpoint
    async def keepalive(request: Request) -> Response:
        session = service.sessions.touch(request.path_params["session_id"])
        return json_response({"session_id": session.id, "ttl_seconds": service.config.session_ttl})

    @endpoint
    async def call_tool(request: Request) -> Response:
        body = await read_object(request)
        arguments = body.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise wire.WireError("arguments must be a JSON object")
        async with service.sessions.use(request.path_params["session_id"]) as session:
            answer = await until_disconnect(request, service.call_tool(session, request.path_params["name"], arguments))
        return json_response(answer) if answer is not None else Response(status_code=499)

    @endpoint
    async def reward(request: Request) -> Response:
        body = await read_object(request)
        async with service.sessions.use(request.path_params["session_id"]) as session:
            answer = await until_disconnect(request, service.reward(session, body))
        return json_response(answer) if answer is not None else Response(status_code=499)

    @endpoint
    async def env_turn(request: Request) -> Response:
        body = await read_object(request)
        async with service.sessions.use(request.path_params["session_id"]) as session:
            answer = await until_disconnect(request, service.env_response(session, body))
        return json_response(answer) if answer is not None else Response(status_code=499)

    @endpoint
    async def teardown(request: Request) -> Response:
        session = service.sessions.get(request.path_params["session_id"])
        return json_response(await service.close(session))

    @endpoint
    async def group_rewards(request: Request) -> Response:
        body = await read_object(request)
        answer = await until_disconnect(request, service.group_rewards(body))
        return json_response(answer) if answer is not None else Response(status_code=499)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        code = wire.ErrorCode.NOT_FOUND if status == 404 else wire.ErrorCode.BAD_REQUEST
        detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
        return error_response(code, f"{request.method} {request.url.path}: {detail}", status)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service.sessions.start()
        try:
            yield
        finally:
            try:
                await service.aclose()
            finally:
                for hook in at_shutdown:
                    hook()

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/metadata", metadata, methods=["GET"]),
        Route("/schema", schema, methods=["GET"]),
        Route("/info", info, methods=["GET"]),
        Route("/tools", tools, methods=["GET"]),
        Route("/dataset/{split}", dataset, methods=["GET"]),
        Route("/sessions", open_session, methods=["POST"]),
        Route("/sessions/{session_id}", session_state, methods=["GET"]),
        Route("/sessions/{session_id}", teardown, methods=["DELETE"]),
        Route("/sessions/{session_id}/keepalive", keepalive, methods=["POST"]),
        Route("/sessions/{session_id}/tools/{name}", call_tool, methods=["POST"]),
        Route("/sessions/{session_id}/reward", reward, methods=["POST"]),
        Route("/sessions/{session_id}/env_response", env_turn, methods=["POST"]),
        Route("/group_rewards", group_rewards, methods=["POST"]),
        WebSocketRoute("/ws", _openenv.endpoint(service)),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: not_found})
    app.state.service = service
    return AccessGuard(app, token=token, token_for_reads=token_for_reads, allowed_origins=allowed_origins)


_STATUS = {
    wire.ErrorCode.NOT_FOUND: 404,
    wire.ErrorCode.TOO_LARGE: 413,
    wire.ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
}


def _check_json_media_type(content_type: str | None) -> None:
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise wire.WireError(
            f"the body must be sent as Content-Type: application/json (got {media_type or 'none'})",
            wire.ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        )


def _count(raw: str | None, name: str, *, minimum: int) -> int:
    if raw is None or not raw.isdigit() or int(raw) < minimum:
        raise wire.WireError(f"{name} must be an integer >= {minimum}, got {raw!r}")
    return int(raw)


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
