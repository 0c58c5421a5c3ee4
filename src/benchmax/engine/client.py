"""The model client: one pooled HTTP connection set per OpenAI-compatible endpoint.

aiohttp with orjson rather than the OpenAI SDK: the SDK's per-call parameter
transforms and pydantic parsing cost several milliseconds per rollout (see
``bench/README.md``), and we need only one route. Retries are layered here, per
endpoint, so every rollout shares one backoff policy, concurrency limit and retry
budget. API keys live only in request headers; nothing here logs or stores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import aiohttp
import orjson

from benchmax.envs.rollout import StaticBearerAuth, Usage
from benchmax.envs.termination import TerminationReason

logger = logging.getLogger("benchmax.client")

_CONTEXT_PATTERN = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|exceed_context_size|exceeds the available context|prompt is too long|too many tokens"
    r"|input is too long",
    re.IGNORECASE,
)
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_ERROR_BODY = 2000

T = TypeVar("T")


class ModelError(Exception):
    """A model request that failed for good; ``reason`` is a termination reason."""

    def __init__(self, reason: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


class _Retryable(Exception):
    def __init__(self, cause: str, message: str, *, reason: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.reason = reason
        self.delay = delay


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, and a budget so retries cannot snowball.

    The budget allows ``budget_floor`` retries plus ``budget_ratio`` per request
    made; past it a retryable failure fails the rollout at once.
    """

    max_attempts: int = 5
    backoff_initial: float = 0.25
    backoff_max: float = 20.0
    retry_after_max: float = 60.0
    budget_ratio: float = 0.5
    budget_floor: int = 50

    def backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max, self.backoff_initial * (2 ** (attempt - 1)))
        return random.uniform(0, ceiling)


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One parsed assistant turn."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: Usage
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    completion_logprobs: tuple[float, ...] | None = None


class ModelClient(Protocol):
    """Anything that turns a chat-completions body into one assistant turn.

    The HTTP client is one; the trainer's in-process policy is another.
    """

    async def chat(self, body: dict[str, Any], *, rollout_id: str | None = None) -> ChatResult:
        """One turn. ``rollout_id`` lets a stateful client (a token-accumulating
        in-process policy) keep per-rollout state; HTTP clients ignore it."""
        ...

    async def aclose(self) -> None: ...


@dataclass
class ClientStats:
    requests: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "retries": dict(self.retries),
            "failures": dict(self.failures),
        }


class HttpModelClient:
    """Chat completions against one OpenAI-compatible base URL."""

    def __init__(
        self,
        base_url: str,
        auth: StaticBearerAuth | None = None,
        *,
        timeout: float = 600.0,
        max_concurrency: int = 256,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {"Content-Type": "application/json", **(auth.headers() if auth else {})}
        self._secret = auth.api_key.encode() if auth and auth.api_key else b""
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.retry = retry or RetryPolicy()
        self.stats = ClientStats()
        self._session: aiohttp.ClientSession | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"HttpModelClient({self.base_url!r})"

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=0, keepalive_timeout=75, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                skip_auto_headers=("User-Agent",),
            )
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
            self._loop = loop
        return self._session

    async def chat(self, body: dict[str, Any], *, rollout_id: str | None = None) -> ChatResult:
        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        return await self._send("POST", self._url, payload, _parse_completion)

    async def request(
        self,
        method: str,
        path: str,
        parse: Callable[[dict[str, Any]], T],
        body: dict[str, Any] | None = None,
    ) -> T:
        """Another route of the same server (``/completions``, ``/models``) with the
        retries, concurrency limit and error mapping of ``chat``. ``parse`` turns the
        reply's JSON object into a result; a ``ValueError`` from it is a malformed
        reply, retried like one."""

        def _parse(raw: bytes) -> T:
            data = _json_object(raw)
            try:
                return parse(data)
            except ValueError as exc:
                raise _malformed(str(exc)) from None

        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY) if body is not None else None
        return await self._send(method, f"{self.base_url}{path}", payload, _parse)

    async def _send(self, method: str, url: str, payload: bytes | None, parse: Callable[[bytes], T]) -> T:
        session = self._ensure_session()
        assert self._semaphore is not None
        attempt = 0
        while True:
            attempt += 1
            self.stats.requests += 1
            try:
                async with self._semaphore:
                    return parse(await self._once(session, method, url, payload))
            except _Retryable as failure:
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
                self.stats.failures[error.reason] += 1
                raise

    def _spend_retry(self) -> bool:
        used = sum(self.stats.retries.values())
        return used < self.retry.budget_floor + self.retry.budget_ratio * self.stats.requests

    async def _once(self, session: aiohttp.ClientSession, method: str, url: str, payload: bytes | None) -> bytes:
        try:
            async with session.request(method, url, data=payload, headers=self._headers) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except TimeoutError:
            raise _Retryable(
                "timeout",
                f"no reply within {self.timeout:g}s",
                reason=TerminationReason.TIMEOUT,
            ) from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise _Retryable(
                "disconnected", f"connection dropped: {exc}", reason=TerminationReason.MODEL_ERROR
            ) from None
        except aiohttp.ClientError as exc:
            raise _Retryable(
                "connection", f"{type(exc).__name__}: {exc}", reason=TerminationReason.MODEL_ERROR
            ) from None
        if status >= 400:
            if self._secret:
                # Some proxies echo the key back in their error; errors end up in the store.
                raw = raw.replace(self._secret, b"***")
            raise _classify_error(status, raw, retry_after)
        return raw

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            with contextlib.suppress(RuntimeError):
                await session.close()


class ClientPool:
    """One client per (base URL, key), shared by every rollout that targets it."""

    def __init__(
        self,
        *,
        timeout: float = 600.0,
        max_concurrency: int = 256,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.retry = retry
        self._clients: dict[tuple[str, str], ModelClient] = {}

    def get(self, base_url: str, auth: StaticBearerAuth | None) -> ModelClient:
        key = (base_url.rstrip("/"), auth.api_key if auth else "")
        client = self._clients.get(key)
        if client is None:
            client = HttpModelClient(
                base_url,
                auth,
                timeout=self.timeout,
                max_concurrency=self.max_concurrency,
                retry=self.retry,
            )
            self._clients[key] = client
        return client

    def register(self, base_url: str, client: ModelClient, auth: StaticBearerAuth | None = None) -> None:
        """Route a base URL to a custom client (an in-process policy, say)."""
        self._clients[(base_url.rstrip("/"), auth.api_key if auth else "")] = client

    def stats(self) -> dict[str, Any]:
        merged: dict[str, Any] = {"requests": 0, "retries": Counter(), "failures": Counter()}
        for client in self._clients.values():
            stats = getattr(client, "stats", None)
            if isinstance(stats, ClientStats):
                merged["requests"] += stats.requests
                merged["retries"].update(stats.retries)
                merged["failures"].update(stats.failures)
        merged["retries"] = dict(merged["retries"])
        merged["failures"] = dict(merged["failures"])
        return merged

    async def aclose(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.aclose()


def _error_text(raw: bytes) -> str:
    text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return text
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        parts = [str(error.get(key)) for key in ("code", "type", "message") if error.get(key)]
        return ": ".join(parts)[:_MAX_ERROR_BODY] or text
    if isinstance(error, str):
        return error[:_MAX_ERROR_BODY]
    if isinstance(data, dict) and isinstance(data.get("detail"), str):
        return data["detail"][:_MAX_ERROR_BODY]
    return text


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
    if status in _RETRYABLE_STATUS or status >= 500:
        return _Retryable(
            f"http_{status}",
            f"HTTP {status}: {text}",
            reason=TerminationReason.MODEL_ERROR,
            delay=_parse_retry_after(retry_after),
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
        raise _malformed("no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("choices[0].message is missing")
    finish_reason = choice.get("finish_reason")
    usage_data = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    usage = Usage(
        _as_int(usage_data.get("prompt_tokens")), _as_int(usage_data.get("completion_tokens"))
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
