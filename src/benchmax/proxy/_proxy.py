"""The recording proxy: an OpenAI-compatible endpoint on loopback that agents call instead of the model.

Each call is forwarded through the run's :class:`~benchmax.client.ClientPool`
(the same client the engine uses, so retries, the outage gate, replicas, the
response cache and the cost ledger apply unchanged) and recorded against the
rollout whose lease it came with. A lease is the only attribution: its URL path
and its key, both drawn from ``secrets``, must name the same live lease, so a
call is never attributed by timing or by guess, and one rollout cannot reach
another's record. Each forwarded call runs in a copy of the context the lease
was taken in, so everything that reads the rollout scope (the call ledger's
group meter, log capture, the engine's clock) sees the rollout it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import ipaddress
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

from aiohttp import web

from benchmax.auth import ModelAuth, redact_url
from benchmax.client import ChatResult, ClientPool, ModelError, scoped_client
from benchmax.envs import SamplingParams, TerminationReason, rollout_scope
from benchmax.errors import BenchmaxError
from benchmax.proxy._lease import ProxyLease
from benchmax.proxy._records import RecordedCall
from benchmax.proxy._wire import (
    SAMPLING_FIELDS,
    BadRequest,
    completion,
    error_response,
    model_error_response,
    models_list,
    parse_request,
    refused,
    stream_events,
    upstream_body,
)

logger = logging.getLogger("benchmax.proxy")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body an agent may send: a long transcript with tool results is well under 1 MiB."""

_BUDGET_MESSAGES = {
    "max_calls_exceeded": "this rollout has used all {max_calls} model calls it was given",
    "rollout_deadline_exceeded": "this rollout's time is up; the proxy answers no more calls for it",
}
_LOOPBACK_NAMES = frozenset({"localhost"})


class ProxyError(BenchmaxError):
    """The proxy was used in a way it cannot serve (not started, a non-loopback host, a lease taken twice)."""


def _loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RecordingProxy:
    """An OpenAI-compatible chat endpoint per run, served on loopback, recording each call per rollout.

    ``clients`` is the run's pool and ``base_url``/``model``/``auth`` the run's
    model endpoint, model id and credentials: every call goes there, whatever
    model the agent names, signed with ``auth`` (the agent never sees it, and
    its own key never leaves the proxy). ``max_body_bytes`` bounds a request
    body (413 past it). Use as ``async with RecordingProxy(...) as proxy`` and
    give each rollout ``async with proxy.lease(rollout_id) as lease``.
    """

    def __init__(
        self,
        clients: ClientPool,
        *,
        model: str,
        base_url: str,
        auth: ModelAuth | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if not _loopback(host):
            raise ProxyError(
                f"the recording proxy binds loopback only (127.0.0.1, ::1 or localhost), not {host!r}: "
                "its leases are bearer credentials for the run's model"
            )
        if max_body_bytes < 1:
            raise ProxyError(f"max_body_bytes must be positive, got {max_body_bytes}")
        self.clients = clients
        self.model = model
        self.upstream = base_url
        self.auth = auth
        self.host = host
        self.port = port
        self.max_body_bytes = max_body_bytes
        self._leases: dict[str, ProxyLease] = {}
        self._rollouts: set[str] = set()
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"RecordingProxy({self.url if self._runner else 'not started'}, upstream={redact_url(self.upstream)!r})"

    @property
    def url(self) -> str:
        """The proxy's root (``http://127.0.0.1:PORT``); agents get a lease's ``base_url`` instead."""
        if self._runner is None:
            raise ProxyError("the recording proxy is not started: use it as `async with RecordingProxy(...)`")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post("/r/{slot}/v1/chat/completions", self._chat)
        app.router.add_get("/r/{slot}/v1/models", self._models)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=4096)
        await site.start()
        server = site._server  # aiohttp keeps the listening sockets there; port 0 is only known after binding
        sockets = getattr(server, "sockets", None) or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._runner = runner

    async def aclose(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> RecordingProxy:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @contextlib.asynccontextmanager
    async def lease(
        self,
        rollout_id: str,
        *,
        max_calls: int | None = None,
        deadline: float | None = None,
        timeout: float | None = None,
        sampling: SamplingParams | None = None,
    ) -> AsyncIterator[ProxyLease]:
        """Credentials for one rollout's agent, valid until the block ends.

        ``max_calls`` bounds the calls the proxy answers; ``deadline`` (a
        ``time.monotonic()`` value) or ``timeout`` (seconds from now; the earlier
        of both counts) bounds when. Past either the proxy answers HTTP 429 with
        ``error.code`` ``max_calls_exceeded`` or ``rollout_deadline_exceeded`` and
        sets ``lease.stop_reason``; a call in flight at the deadline is cut there.
        ``sampling`` is the run's sampling, sent with every call over the agent's
        own fields (how a trainer gets token ids and logprobs). The calls run in
        the rollout scope of the code that takes the lease. On exit, calls still
        in flight are cancelled and recorded as such, and the key stops working.
        """
        if self._runner is None:
            raise ProxyError("the recording proxy is not started: take leases inside `async with RecordingProxy(...)`")
        if max_calls is not None and max_calls < 0:
            raise ProxyError(f"max_calls must be 0 or more, got {max_calls}")
        rollout_id = str(rollout_id)
        if rollout_id in self._rollouts:
            raise ProxyError(
                f"rollout {rollout_id!r} already holds a lease of this proxy; end it before taking another"
            )
        if timeout is not None:
            by_timeout = time.monotonic() + timeout
            deadline = by_timeout if deadline is None else min(deadline, by_timeout)
        slot = secrets.token_urlsafe(16)
        with rollout_scope(rollout_id):
            context = contextvars.copy_context()
        lease = ProxyLease(
            rollout_id,
            base_url=f"{self.url}/r/{slot}/v1",
            api_key=f"bmx-{secrets.token_urlsafe(32)}",
            slot=slot,
            max_calls=max_calls,
            deadline=deadline,
            sampling=sampling,
            context=context,
        )
        self._leases[slot] = lease
        self._rollouts.add(rollout_id)
        try:
            yield lease
        finally:
            lease._closed = True
            del self._leases[slot]
            self._rollouts.discard(rollout_id)
            pending = list(lease._tasks)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            self.clients.end_rollout(self.upstream, rollout_id)

    # The routes.

    def _authorise(self, request: web.Request) -> ProxyLease | None:
        lease = self._leases.get(request.match_info.get("slot", ""))
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        if lease is None or lease._closed or scheme.lower() != "bearer":
            return None
        return lease if hmac.compare_digest(key.strip().encode(), lease.api_key.encode()) else None

    async def _models(self, request: web.Request) -> web.Response:
        if self._authorise(request) is None:
            return _unauthorised()
        return web.Response(body=models_list(self.model), content_type="application/json")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        lease = self._authorise(request)
        if lease is None:
            return _unauthorised()
        try:
            body = await self._read(request)
        except BadRequest as error:
            return refused(error)
        index, code = lease._admit()
        if index is None:
            message = _BUDGET_MESSAGES[code].format(max_calls=lease.max_calls)
            return error_response(429, message, code=code, kind="insufficient_quota")
        task = asyncio.get_running_loop().create_task(self._forward(lease, index, body), context=lease._context.copy())
        lease._tasks.add(task)
        task.add_done_callback(lease._tasks.discard)
        try:
            result = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return error_response(
                503, "the rollout's lease ended while the call was in flight", code="lease_ended", kind="upstream_error"
            )
        if isinstance(result, web.Response):
            return result
        call_id = f"chatcmpl-bmx{next(self._ids)}"
        if not body.get("stream"):
            return web.Response(body=completion(call_id, self.model, result), content_type="application/json")
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for event in stream_events(call_id, self.model, result, include_usage=include_usage):
            await response.write(event)
        await response.write_eof()
        return response

    async def _read(self, request: web.Request) -> dict[str, Any]:
        if request.content_type != "application/json":
            raise BadRequest(
                415,
                "the proxy takes JSON request bodies (Content-Type: application/json), "
                f"not {request.content_type[:80]!r}",
                code="unsupported_media_type",
            )
        limit = self.max_body_bytes
        too_large = BadRequest(413, f"the request body is larger than {limit:,} bytes", code="request_too_large")
        if request.content_length is not None and request.content_length > limit:
            raise too_large
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_large from None
        return parse_request(raw)

    async def _forward(self, lease: ProxyLease, index: int, body: dict[str, Any]) -> ChatResult | web.Response:
        """Send one call through the run's client, in the lease's context, and record it whatever happens."""
        started_at = time.time()
        clock = time.perf_counter()
        result: ChatResult | None = None
        error: str | None = None
        reason: str | None = None
        answer: web.Response | None = None
        sent = upstream_body(body, self.model, lease.sampling)
        client = scoped_client(self.clients.get(self.upstream), role="policy")
        limit = lease._limit()
        lease._limits.add(limit)
        try:
            async with limit:
                if self.auth is None:
                    result = await client.chat(sent, rollout_id=lease.rollout_id)
                else:
                    result = await client.chat(sent, rollout_id=lease.rollout_id, auth=self.auth)
        except ModelError as exc:
            error, reason = str(exc), exc.reason
            answer = model_error_response(exc)
        except TimeoutError:
            if not limit.expired():
                raise
            lease._stop(TerminationReason.TIMEOUT)
            error, reason = "the rollout's deadline passed while the call was in flight", TerminationReason.TIMEOUT
            answer = error_response(
                429,
                _BUDGET_MESSAGES["rollout_deadline_exceeded"],
                code="rollout_deadline_exceeded",
                kind="insufficient_quota",
            )
        except asyncio.CancelledError:
            error, reason = "the call was cancelled (the rollout's lease ended)", TerminationReason.CANCELLED
            raise
        finally:
            lease._limits.discard(limit)
            lease._record(_recorded(index, body, result, error, reason, started_at, time.perf_counter() - clock))
        return result if answer is None else answer


def _recorded(
    index: int,
    body: Mapping[str, Any],
    result: ChatResult | None,
    error: str | None,
    reason: str | None,
    started_at: float,
    model_seconds: float,
) -> RecordedCall:
    tools = body.get("tools")
    common = {
        "index": index,
        "messages": tuple(body["messages"]),
        "tools": tuple(tools) if isinstance(tools, list) else None,
        "tool_choice": body.get("tool_choice"),
        "model": str(body.get("model") or ""),
        "stream": bool(body.get("stream")),
        "sampling": {key: value for key, value in body.items() if key not in SAMPLING_FIELDS},
        "started_at": started_at,
        "ended_at": time.time(),
        "model_seconds": model_seconds,
    }
    if result is None:
        return RecordedCall(**common, error=error or "the call got no reply", error_reason=reason)
    return RecordedCall(
        **common,
        message=result.message,
        finish_reason=result.finish_reason,
        usage=result.usage,
        prompt_token_ids=result.prompt_token_ids,
        completion_token_ids=result.completion_token_ids,
        completion_logprobs=result.completion_logprobs,
        policy_version=result.policy_version,
    )


def _unauthorised() -> web.Response:
    return error_response(
        401,
        "no live lease of this proxy has this URL and key "
        "(a key works only with its own base_url, while its rollout runs)",
        code="invalid_api_key",
        kind="invalid_request_error",
    )
