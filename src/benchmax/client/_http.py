"""Chat completions against one OpenAI-compatible endpoint: pooled connections, retries, a health gate.

aiohttp with orjson rather than the OpenAI SDK: the SDK's per-call parameter
transforms and pydantic parsing cost several milliseconds per rollout (see
``bench/README.md``), and we need only a few routes. Retries are layered here,
per endpoint, so every rollout shares one backoff policy, concurrency limit,
retry budget and health gate. Credentials live only in request headers: nothing
here logs or stores them, and a reply that echoes one, an error body or a
successful reply's message, is masked once decoded (a JSON body may spell the
key with escapes that only decoding undoes), so neither the store nor an agent
behind the recording proxy receives it. A base URL's ``user:password@`` becomes
basic auth and leaves the URL; every message names the server by ``shown_url``
(credential parameters masked). Every body is read by ``benchmax.bounded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from benchmax.auth import (
    BasicAuth,
    ModelAuth,
    ModelRequestContext,
    StaticBearerAuth,
    mask_secrets,
    redact_url,
    redact_urls,
    request_secrets,
    split_credentials,
)
from benchmax.bounded import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, read_reply
from benchmax.client._gate import DEFAULT_MAX_OUTAGE, EndpointGate, Unavailable
from benchmax.client._limit import RequestLimit
from benchmax.client._models import UNNAMED, ServedModel, parse_models, parse_models_body
from benchmax.client._replies import (
    _GATEWAY_STATUS,
    _classify_error,
    _error_text,
    _json_object,
    _malformed,
    _parse_completion,
    _read_body,
    _Retryable,
)
from benchmax.client._retry import RetryPolicy
from benchmax.client._types import ChatResult, EndpointDown, ModelError
from benchmax.envs import TerminationReason
from benchmax.telemetry import traced_model_call

logger = logging.getLogger("benchmax.client")

_NO_ROUTE = frozenset({404, 405, 501})
"""Answers of a server that has no such route: permanent, and no sign of an outage."""
_PROBE_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection: a rescheduled pod's old address drops packets instead of refusing them."""
_PROBE_BODY_BYTES = 64 * 1024
"""What a probe reads of its answer: only the status matters, the body is read to reuse the connection."""

T = TypeVar("T")


@dataclass
class ClientStats:
    requests: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    resent: int = 0
    """Requests sent again after their endpoint came back (not counted as retries)."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "retries": dict(self.retries),
            "failures": dict(self.failures),
            "resent": self.resent,
        }


class HttpModelClient:
    """Chat completions (and the other routes of the same server) at one base URL.

    ``auth`` signs requests that bring no ``auth`` of their own; user info in
    ``base_url`` (``https://USER:PASSWORD@host/v1``) is that auth, sent as basic
    auth, and may not be given with ``auth`` as well. ``gate`` is the
    endpoint's health gate (one is made with ``max_outage`` when not given).
    ``connect_timeout`` bounds opening a connection, within ``timeout``.
    ``max_reply_bytes`` bounds a reply's body after decompression: past it the
    read stops and the request fails (a model error, not retried).
    At most ``max_requests`` requests are in flight; with ``adapt_requests``
    fewer while the event loop sending them is saturated (see ``RequestLimit``).
    """

    def __init__(
        self,
        base_url: str,
        auth: ModelAuth | None = None,
        *,
        timeout: float = 600.0,
        max_requests: int = 256,
        adapt_requests: bool = True,
        retry: RetryPolicy | None = None,
        gate: EndpointGate | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        base_url, credentials = split_credentials(base_url.rstrip("/"))
        if credentials is not None and auth is not None:
            raise ValueError(
                f"{redact_url(base_url)}: the URL carries credentials (user:password@) and an auth is given too; "
                "a request carries one Authorization header, so give the credentials in one place"
            )
        self.base_url = base_url
        self.shown_url = redact_url(base_url)
        """``base_url`` fit to print: every message of this client names the server so."""
        self._url = f"{self.base_url}/chat/completions"
        self._server = _server_of(self.base_url)
        auth = auth if credentials is None else credentials
        self.auth = auth
        self.timeout = timeout
        self.connect_timeout = min(connect_timeout, timeout)
        self.max_requests = max_requests
        self.max_reply_bytes = max_reply_bytes
        self.adapt_requests = adapt_requests
        self.turn_hold = 0.0
        """Seconds a rollout's slot stays reserved for its next turn (see :meth:`keep_turns_together`)."""
        self.retry = retry or RetryPolicy()
        self.stats = ClientStats()
        self.gate = gate or EndpointGate(self.base_url, probe=self.probe, max_outage=max_outage)
        self._static = _static_headers(auth)
        self._session: aiohttp.ClientSession | None = None
        self._limit: RequestLimit | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"HttpModelClient({self.shown_url!r})"

    @property
    def request_limit(self) -> int:
        """Requests this client lets into flight now: ``max_requests``, or fewer while its loop is saturated."""
        return self.max_requests if self._limit is None else self._limit.limit

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now (for rollouts: rollouts waiting for the model)."""
        return 0 if self._limit is None else self._limit.waiting

    def keep_turns_together(self, *, hold: float) -> None:
        """Serve one request at a time, a rollout's turns back to back (see ``RequestLimit``).

        For a server that evaluates one prompt at a time and reuses its KV cache
        only for a prompt that extends its last one (llama-cpp-python's): each
        turn then evaluates only what the last turn added. ``hold`` bounds how
        long the model may idle while a rollout runs its tools.
        """
        self.max_requests = 1
        self.adapt_requests = False
        self.turn_hold = hold
        if self._limit is not None:
            self._limit = RequestLimit(1, adaptive=False, name=self.shown_url, hold=hold)

    def end_rollout(self, rollout_id: str) -> None:
        """The rollout asks for no more turns: a slot kept for it goes to the next rollout."""
        if self._limit is not None:
            self._limit.forget(rollout_id)

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=75, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout),
                skip_auto_headers=("User-Agent",),
            )
            self._limit = RequestLimit(
                self.max_requests, adaptive=self.adapt_requests, name=self.shown_url, hold=self.turn_hold
            )
            self._loop = loop
        return self._session

    async def chat(
        self,
        body: dict[str, Any],
        *,
        rollout_id: str | None = None,
        auth: ModelAuth | None = None,
        wait: bool = True,
    ) -> ChatResult:
        """One assistant turn. While the endpoint is down this waits; ``wait=False`` raises
        ``Unavailable`` instead (so a router can send the request to another replica)."""
        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = await self._headers(auth, str(body.get("model", "")), rollout_id)
        secrets = request_secrets(headers)
        parse = _parse_completion if not secrets else lambda raw: _masked(_parse_completion(raw), secrets)
        return await traced_model_call(
            body,
            *self._server,
            lambda: self._send("POST", self._url, payload, parse, headers, wait=wait, key=rollout_id),
        )

    async def request(
        self,
        method: str,
        path: str,
        parse: Callable[[dict[str, Any]], T],
        body: dict[str, Any] | None = None,
        *,
        auth: ModelAuth | None = None,
        wait: bool = True,
    ) -> T:
        """Another route of the same server (``/completions``, ``/models``) with the
        retries, concurrency limit, gate and error mapping of ``chat``. ``parse``
        turns the reply's JSON object into a result; a ``ValueError`` from it is a
        malformed reply, retried like one."""

        def _parse(raw: bytes) -> T:
            data = mask_secrets(_json_object(raw), secrets)
            try:
                return parse(data)
            except ValueError as exc:
                raise _malformed(str(exc)) from None

        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY) if body is not None else None
        headers = await self._headers(auth, str((body or {}).get("model", "")), None)
        secrets = request_secrets(headers)
        return await self._send(method, f"{self.base_url}{path}", payload, _parse, headers, wait=wait)

    async def probe(self) -> bool:
        """Whether the endpoint answers at all: any HTTP answer to ``GET /models`` but 502/503/504.

        A server without the route (404, 405, 501 and an error page) is up: its
        answer says so. Only a gateway's "nothing behind me" or no answer at all
        is down. The host name is resolved afresh: a rescheduled server comes
        back at another address.
        """
        session = self._ensure_session()
        connector = session.connector
        if isinstance(connector, aiohttp.TCPConnector):
            connector.clear_dns_cache()
        timeout = aiohttp.ClientTimeout(total=_PROBE_TIMEOUT, sock_connect=min(self.connect_timeout, _PROBE_TIMEOUT))
        try:
            async with session.get(f"{self.base_url}/models", timeout=timeout) as response:
                with contextlib.suppress(ReplyTooLarge):  # an answer all the same
                    await read_reply(response, limit=_PROBE_BODY_BYTES, what=f"from {self.shown_url}/models")
                return response.status not in _GATEWAY_STATUS
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    async def served_models(self, *, auth: ModelAuth | None = None) -> tuple[ServedModel, ...] | None:
        """What ``GET /models`` lists, sent like any request (retries, gate); ``None`` where the
        server has no such route (404, 405, 501) or answers it with something else than a list."""
        try:
            return await self.request("GET", "/models", parse_models, auth=auth)
        except ModelError as exc:
            if exc.status in _NO_ROUTE:
                return None
            raise

    async def preflight(self, model: str | None = None, *, auth: ModelAuth | None = None) -> list[str]:
        """Fail fast, with what to do, when the endpoint cannot serve chat completions.

        One ``GET /models`` before any rollout is spent; where the server has no
        such route (any answer but a model list, a refused key or a gateway's
        502/503/504) a 1-token chat request instead. An unreachable server, a URL
        missing its ``/v1`` and a refused key each get their own message; an
        error page is said in one line. A gateway's 502/503/504 is retried as a
        request's would be (one blip costs one retry). Returns the model ids the
        server lists (empty when it lists none).
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._preflight_once(model, auth)
            except ModelError as exc:
                if exc.status not in _GATEWAY_STATUS or attempt >= self.retry.max_attempts:
                    raise
                delay = self.retry.backoff(attempt)
                logger.warning("preflight: %s; retry %d/%d in %.2fs", exc, attempt, self.retry.max_attempts - 1, delay)
                await asyncio.sleep(delay)

    async def _preflight_once(self, model: str | None, auth: ModelAuth | None) -> list[str]:
        session = self._ensure_session()
        headers = await self._headers(auth, model or "", "preflight")
        try:
            async with session.get(
                f"{self.base_url}/models", headers=headers, timeout=aiohttp.ClientTimeout(total=30)
            ) as response:
                status = response.status
                raw = await _read_body(response, self.max_reply_bytes, f"{self.shown_url}/models")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"cannot reach the model server at {self.shown_url} ({type(exc).__name__}: {redact_urls(str(exc))}); "
                "is it running, and is --base-url right?",
            ) from None
        if status in (401, 403):
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.shown_url} refused the credentials (HTTP {status}: "
                f"{_error_text(raw, headers)}); check --api-key-env (or the user:password in --base-url, "
                "which is never stored: give it again with --resume)",
                status=status,
            )
        if status in _GATEWAY_STATUS:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.shown_url} answers HTTP {status} "
                f"({_error_text(raw, headers)}); is it still starting?",
                status=status,
            )
        served = parse_models_body(raw) if 200 <= status < 300 else None
        if served is None:
            logger.info(
                "%s answers GET /models with HTTP %d (%s); checking it with a 1-token chat request",
                self.shown_url,
                status,
                _error_text(raw, headers),
            )
            await self._preflight_chat(session, headers, model)
            return []
        return [entry.id for entry in served]

    async def _preflight_chat(
        self, session: aiohttp.ClientSession, headers: Mapping[str, str], model: str | None
    ) -> None:
        hello = [{"role": "user", "content": "hi"}]
        body = orjson.dumps({"model": model or UNNAMED, "messages": hello, "max_tokens": 1})
        try:
            async with session.post(
                self._url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
            ) as response:
                status = response.status
                raw = await _read_body(response, self.max_reply_bytes, f"{self.shown_url}/chat/completions")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.shown_url} failed a 1-token request: {redact_urls(str(exc))}",
            ) from None
        said = _error_text(raw, headers)
        if status in (401, 403):
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.shown_url} refused the credentials (HTTP {status}: {said}); "
                "check --api-key-env",
                status=status,
            )
        if status == 404:
            hint = ""
            if not urlsplit(self.base_url).path.rstrip("/").endswith("/v1"):
                hint = f"; OpenAI-compatible servers serve under /v1: try --base-url {_under_v1(self.shown_url)}"
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"{self.shown_url} answers a 1-token chat request with HTTP 404 ({said}){hint}",
                status=404,
            )
        if status >= 500:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.shown_url} answers a 1-token chat request with HTTP {status} ({said})",
                status=status,
            )

    async def _headers(self, auth: ModelAuth | None, model: str, rollout_id: str | None) -> Mapping[str, str]:
        signer = auth if auth is not None else self.auth
        if signer is None:
            return _JSON
        if signer is self.auth and self._static is not None:
            return self._static
        try:
            extra = await signer.headers_for_request(ModelRequestContext(self.base_url, model, rollout_id or ""))
        except Exception as exc:
            # The headers are part of the model request: a provider that cannot give them
            # (an unbound InjectedAuth, a token service down) fails it as model_error, as in 0.2.x.
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"model auth {type(signer).__name__} gave no headers: {type(exc).__name__}: {exc}",
            ) from exc
        return {**_JSON, **extra}

    async def _send(
        self,
        method: str,
        url: str,
        payload: bytes | None,
        parse: Callable[[bytes], T],
        headers: Mapping[str, str],
        *,
        wait: bool = True,
        key: str | None = None,
    ) -> T:
        session = self._ensure_session()
        limit = self._limit
        assert limit is not None
        attempt = 0
        seen: float | None = None
        gate = self.gate
        while True:
            if gate.down:
                try:
                    seen = await gate.admit(wait=wait, seen=seen) or seen
                except EndpointDown:
                    self.stats.failures["endpoint_down"] += 1
                    raise
            attempt += 1
            self.stats.requests += 1
            try:
                granted = await limit.acquire(key)
                try:
                    raw = await self._once(session, method, url, payload, headers)
                    try:
                        result = parse(raw)
                    except _Retryable as failure:
                        raise failure.masked(headers) from None
                except BaseException:
                    limit.release(granted, served=False)
                    raise
                limit.release(granted, key=key)
                gate.success()
                return result
            except _Retryable as failure:
                # ``payload`` (one bytes object per call) names this request across its attempts.
                if failure.kind is not None and await gate.failure(str(failure)[:300], failure.kind, request=payload):
                    # The endpoint is down: this request waits at the gate (or goes to another
                    # replica) and is sent again, without spending an attempt or the budget.
                    attempt -= 1
                    if not wait:
                        raise Unavailable(self.shown_url) from None
                    self.stats.resent += 1
                    continue
                if attempt >= self.retry.max_attempts or not self._spend_retry():
                    self.stats.failures[failure.cause] += 1
                    why = "attempts" if attempt >= self.retry.max_attempts else "retry budget"
                    raise ModelError(
                        failure.reason, f"{failure} (gave up after {attempt} attempts; {why} spent)"
                    ) from None
                delay = self.retry.backoff(attempt)
                if failure.delay is not None:
                    delay = min(max(delay, failure.delay), self.retry.retry_after_max)
                self.stats.retries[failure.cause] += 1
                logger.warning(
                    "model request failed (%s: %s); retry %d/%d in %.2fs",
                    failure.cause,
                    failure,
                    attempt,
                    self.retry.max_attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)
            except ModelError as error:
                gate.success()
                self.stats.failures[error.reason] += 1
                raise

    def _spend_retry(self) -> bool:
        used = sum(self.stats.retries.values())
        return used < self.retry.budget_floor + self.retry.budget_ratio * self.stats.requests

    async def _once(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        payload: bytes | None,
        headers: Mapping[str, str],
    ) -> bytes:
        try:
            async with session.request(method, url, data=payload, headers=headers) as response:
                raw = await _read_body(response, self.max_reply_bytes, redact_url(url))
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except aiohttp.ConnectionTimeoutError:
            raise _Retryable(
                "connect_timeout",
                f"no connection within {self.connect_timeout:g}s",
                reason=TerminationReason.TIMEOUT,
                kind="timeout",
            ) from None
        except TimeoutError:
            raise _Retryable(
                "timeout", f"no reply within {self.timeout:g}s", reason=TerminationReason.TIMEOUT, kind="timeout"
            ) from None
        except aiohttp.ClientConnectorError as exc:
            # Refused, no route, or a host name that does not resolve (ClientConnectorDNSError).
            raise _Retryable(
                "connection", f"{type(exc).__name__}: {exc}", reason=TerminationReason.MODEL_ERROR, kind="refused"
            ) from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            raise _Retryable(
                "disconnected", f"connection dropped: {exc}", reason=TerminationReason.MODEL_ERROR, kind="dropped"
            ) from None
        except aiohttp.ClientError as exc:
            raise _Retryable(
                "connection", f"{type(exc).__name__}: {exc}", reason=TerminationReason.MODEL_ERROR
            ) from None
        if status >= 400:
            raise _classify_error(status, _error_text(raw, headers), retry_after)
        return raw

    async def aclose(self) -> None:
        await self.gate.aclose()
        session, self._session = self._session, None
        if session is not None and not session.closed:
            with contextlib.suppress(RuntimeError):
                await session.close()


_JSON = {"Content-Type": "application/json"}


def _static_headers(auth: ModelAuth | None) -> Mapping[str, str] | None:
    """Headers computed once for a fixed key, so the hot path makes no call per request."""
    if isinstance(auth, StaticBearerAuth | BasicAuth):
        return {**_JSON, **auth.headers()}
    return None


def _masked(result: ChatResult, secrets: list[str]) -> ChatResult:
    """``result`` with any echo of the request's credentials in its message (content, reasoning,
    tool call arguments) masked: a reply is stored, shown and forwarded to agents, never the key."""
    message = mask_secrets(result.message, secrets)
    return result if message == result.message else dataclasses.replace(result, message=message)


def _under_v1(url: str) -> str:
    """``url`` with ``/v1`` added to its path (its query, if any, kept after it)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/v1"))


def _server_of(base_url: str) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a base URL, for the spans of its calls."""
    parts = urlsplit(base_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None and parts.scheme in ("http", "https"):
        port = 443 if parts.scheme == "https" else 80
    return parts.hostname, port
