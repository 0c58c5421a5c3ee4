"""Chat completions against one OpenAI-compatible endpoint: pooled connections, retries, a health gate.

aiohttp with orjson rather than the OpenAI SDK: the SDK's per-call parameter
transforms and pydantic parsing cost several milliseconds per rollout (see
``bench/README.md``), and we need only a few routes. Retries are layered here,
per endpoint, so every rollout shares one backoff policy, concurrency limit,
retry budget and health gate. Credentials live only in request headers: nothing
here logs or stores them, and an error body that echoes one is masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson

from benchmax.auth import ModelAuth, ModelRequestContext, StaticBearerAuth
from benchmax.client._gate import DEFAULT_MAX_OUTAGE, EndpointGate, FailureKind, Unavailable
from benchmax.client._limit import RequestLimit
from benchmax.client._models import UNNAMED, ServedModel, parse_models, parse_models_body
from benchmax.client._retry import RetryPolicy
from benchmax.client._types import ChatResult, EndpointDown, ModelError
from benchmax.envs import TerminationReason, Usage

logger = logging.getLogger("benchmax.client")

_CONTEXT_PATTERN = re.compile(
    r"context_length_exceeded|context_budget_exceeded|maximum context length|context length|context window"
    r"|exceed_context_size|exceeds the available context|prompt is too long|too many tokens"
    r"|input is too long",
    re.IGNORECASE,
)
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_GATEWAY_STATUS = frozenset({502, 503, 504})
"""Answers that mean the endpoint (or the proxy before it) cannot serve anything right now."""
_NO_ROUTE = frozenset({404, 405, 501})
"""Answers of a server that has no such route: permanent, and no sign of an outage."""
_ERROR_LINE = 300
"""Characters of an error that is not a JSON error object (an HTML page, plain text): one line."""
_MAX_ERROR_BODY = 2000
_PROBE_TIMEOUT = 5.0
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection: a rescheduled pod's old address drops packets instead of refusing them."""

T = TypeVar("T")


class _Retryable(Exception):
    """A failure worth another try. With a ``kind``, it may be the endpoint's rather than the request's."""

    def __init__(
        self,
        cause: str,
        message: str,
        *,
        reason: str,
        delay: float | None = None,
        kind: FailureKind | None = None,
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.reason = reason
        self.delay = delay
        self.kind = kind


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

    ``auth`` signs requests that bring no ``auth`` of their own. ``gate`` is the
    endpoint's health gate (one is made with ``max_outage`` when not given).
    ``connect_timeout`` bounds opening a connection, within ``timeout``.
    At most ``max_concurrency`` requests are in flight; with ``adapt_concurrency``
    fewer while the event loop sending them is saturated (see ``RequestLimit``).
    """

    def __init__(
        self,
        base_url: str,
        auth: ModelAuth | None = None,
        *,
        timeout: float = 600.0,
        max_concurrency: int = 256,
        adapt_concurrency: bool = True,
        retry: RetryPolicy | None = None,
        gate: EndpointGate | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._url = f"{self.base_url}/chat/completions"
        self.auth = auth
        self.timeout = timeout
        self.connect_timeout = min(connect_timeout, timeout)
        self.max_concurrency = max_concurrency
        self.adapt_concurrency = adapt_concurrency
        self.retry = retry or RetryPolicy()
        self.stats = ClientStats()
        self.gate = gate or EndpointGate(self.base_url, probe=self.probe, max_outage=max_outage)
        self._static = _static_headers(auth)
        self._session: aiohttp.ClientSession | None = None
        self._limit: RequestLimit | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"HttpModelClient({self.base_url!r})"

    @property
    def request_limit(self) -> int:
        """Requests this client lets into flight now: ``max_concurrency``, or fewer while its loop is saturated."""
        return self.max_concurrency if self._limit is None else self._limit.limit

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=75, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout),
                skip_auto_headers=("User-Agent",),
            )
            self._limit = RequestLimit(self.max_concurrency, adaptive=self.adapt_concurrency, name=self.base_url)
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
        return await self._send("POST", self._url, payload, _parse_completion, headers, wait=wait)

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
            data = _json_object(raw)
            try:
                return parse(data)
            except ValueError as exc:
                raise _malformed(str(exc)) from None

        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY) if body is not None else None
        headers = await self._headers(auth, str((body or {}).get("model", "")), None)
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
                await response.read()
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
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"cannot reach the model server at {self.base_url} ({type(exc).__name__}: {exc}); "
                "is it running, and is --base-url right?",
            ) from None
        if status in (401, 403):
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.base_url} refused the credentials (HTTP {status}: "
                f"{self._mask(_error_text(raw), headers)}); check --api-key-env",
                status=status,
            )
        if status in _GATEWAY_STATUS:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.base_url} answers HTTP {status} "
                f"({self._mask(_error_text(raw), headers)}); is it still starting?",
                status=status,
            )
        served = parse_models_body(raw) if 200 <= status < 300 else None
        if served is None:
            logger.info(
                "%s answers GET /models with HTTP %d (%s); checking it with a 1-token chat request",
                self.base_url,
                status,
                self._mask(_error_text(raw), headers),
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
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ModelError(
                TerminationReason.MODEL_ERROR, f"the model server at {self.base_url} failed a 1-token request: {exc}"
            ) from None
        said = self._mask(_error_text(raw), headers)
        if status in (401, 403):
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.base_url} refused the credentials (HTTP {status}: {said}); "
                "check --api-key-env",
                status=status,
            )
        if status == 404:
            hint = ""
            if not self.base_url.endswith("/v1"):
                hint = f"; OpenAI-compatible servers serve under /v1: try --base-url {self.base_url}/v1"
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"{self.base_url} answers a 1-token chat request with HTTP 404 ({said}){hint}",
                status=404,
            )
        if status >= 500:
            raise ModelError(
                TerminationReason.MODEL_ERROR,
                f"the model server at {self.base_url} answers a 1-token chat request with HTTP {status} ({said})",
                status=status,
            )

    async def _headers(self, auth: ModelAuth | None, model: str, rollout_id: str | None) -> Mapping[str, str]:
        signer = auth if auth is not None else self.auth
        if signer is None:
            return _JSON
        if signer is self.auth and self._static is not None:
            return self._static
        extra = await signer.headers_for_request(ModelRequestContext(self.base_url, model, rollout_id or ""))
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
                granted = await limit.acquire()
                try:
                    result = parse(await self._once(session, method, url, payload, headers))
                except BaseException:
                    limit.release(granted, served=False)
                    raise
                limit.release(granted)
                gate.success()
                return result
            except _Retryable as failure:
                # ``payload`` (one bytes object per call) names this request across its attempts.
                if failure.kind is not None and await gate.failure(str(failure)[:300], failure.kind, request=payload):
                    # The endpoint is down: this request waits at the gate (or goes to another
                    # replica) and is sent again, without spending an attempt or the budget.
                    attempt -= 1
                    if not wait:
                        raise Unavailable(self.base_url) from None
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
                raw = await response.read()
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
            raise _classify_error(status, self._mask_bytes(raw, headers), retry_after)
        return raw

    def _mask_bytes(self, raw: bytes, headers: Mapping[str, str]) -> bytes:
        # Some proxies echo the key back in their error; errors end up in the store.
        for secret in _secrets(headers):
            raw = raw.replace(secret.encode(), b"***")
        return raw

    def _mask(self, text: str, headers: Mapping[str, str]) -> str:
        for secret in _secrets(headers):
            text = text.replace(secret, "***")
        return text

    async def aclose(self) -> None:
        await self.gate.aclose()
        session, self._session = self._session, None
        if session is not None and not session.closed:
            with contextlib.suppress(RuntimeError):
                await session.close()


_JSON = {"Content-Type": "application/json"}


def _static_headers(auth: ModelAuth | None) -> Mapping[str, str] | None:
    """Headers computed once for a fixed key, so the hot path makes no call per request."""
    if isinstance(auth, StaticBearerAuth):
        return {**_JSON, **auth.headers()}
    return None


def _secrets(headers: Mapping[str, str]) -> list[str]:
    values = []
    for name, value in headers.items():
        if name.lower() in ("content-type",):
            continue
        secret = value.split(" ", 1)[1] if value.lower().startswith("bearer ") else value
        if len(secret) >= 4:
            values.append(secret)
    return values


def _error_text(raw: bytes) -> str:
    """What an error body says, in one line: a JSON error's message, else the page summarised
    (an HTML page by its title, its tags and whitespace gone), never the whole page."""
    text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _one_line(text)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        parts = [str(error.get(key)) for key in ("code", "type", "message") if error.get(key)]
        said = ": ".join(parts)
    elif isinstance(error, str):
        said = error
    elif isinstance(data, dict) and isinstance(data.get("detail"), str):
        said = data["detail"]
    else:
        return _one_line(text)
    return _SPACE.sub(" ", said[:_MAX_ERROR_BODY]).strip() or _one_line(text)


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def _one_line(text: str) -> str:
    if "<" in text and _TAG.search(text):
        title = _TITLE.search(text)
        body = _TAG.sub(" ", _HIDDEN.sub(" ", text))
        text = (title.group(1) if title and title.group(1).strip() else body) + " (an HTML page)"
    line = _SPACE.sub(" ", text).strip() or "(empty body)"
    return line if len(line) <= _ERROR_LINE else line[: _ERROR_LINE - 3] + "..."


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _classify_error(status: int, raw: bytes, retry_after: str | None) -> Exception:
    text = _error_text(raw)
    if status in (400, 413, 422) and _CONTEXT_PATTERN.search(text):
        return ModelError(TerminationReason.CONTEXT_EXCEEDED, f"HTTP {status}: {text}", status=status)
    if status in _RETRYABLE_STATUS or (status >= 500 and status != 501):
        # 501 Not Implemented: the server has no such route, which no retry changes.
        kind: FailureKind | None = None
        if status >= 500 and retry_after is None:
            # A Retry-After is the server pacing this request, not an endpoint gone.
            kind = "gateway" if status in _GATEWAY_STATUS else "server_error"
        return _Retryable(
            f"http_{status}",
            f"HTTP {status}: {text}",
            reason=TerminationReason.MODEL_ERROR,
            delay=_parse_retry_after(retry_after),
            kind=kind,
        )
    return ModelError(TerminationReason.MODEL_ERROR, f"HTTP {status}: {text}", status=status)


def _malformed(why: str) -> _Retryable:
    return _Retryable("malformed", f"malformed completion: {why}", reason=TerminationReason.MODEL_ERROR)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _malformed(f"invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _malformed("body is not a JSON object")
    return data


def _parse_completion(raw: bytes) -> ChatResult:
    data = _json_object(raw)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # Retried (0.2.5 failed at once): gateways send 200 with an error and no choices
        # for an upstream blip, and say why in "error" (docs/migrating.md).
        error = data.get("error")
        said = f" (error: {_error_text(orjson.dumps({'error': error}))})" if error else ""
        raise _malformed(f"no choices{said}")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("choices[0].message is missing")
    finish_reason = choice.get("finish_reason")
    usage_data = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    details = usage_data.get("prompt_tokens_details")
    usage = Usage(
        _as_int(usage_data.get("prompt_tokens")),
        _as_int(usage_data.get("completion_tokens")),
        _as_int(details.get("cached_tokens")) if isinstance(details, dict) else 0,
    )
    return ChatResult(
        message=message,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        usage=usage,
        prompt_token_ids=_int_tuple(data.get("prompt_token_ids") or choice.get("prompt_token_ids")),
        completion_token_ids=_int_tuple(choice.get("token_ids")),
        completion_logprobs=_logprobs(choice.get("logprobs")),
    )


def _as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _int_tuple(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(item, int) for item in value):
        return tuple(value)
    return None


def _logprobs(value: object) -> tuple[float, ...] | None:
    if not isinstance(value, dict):
        return None
    content = value.get("content")
    if not isinstance(content, list):
        return None
    result = []
    for item in content:
        if not isinstance(item, dict) or not isinstance(item.get("logprob"), int | float):
            return None
        result.append(float(item["logprob"]))
    return tuple(result)
