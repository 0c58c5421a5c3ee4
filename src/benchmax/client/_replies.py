"""Reading an endpoint's replies: a bounded body, an error in one masked line, which failures are
worth another try, and a completion parsed into a ``ChatResult``.

What comes back from a model server is untrusted: every reader here bounds what it keeps and
masks any echo of the request's credentials before a message leaves this module.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from benchmax.auth import mask_secrets, request_secrets
from benchmax.bounded import ReplyTooLarge, read_reply
from benchmax.client._gate import FailureKind
from benchmax.client._numbers import logprob, token_count, token_ids
from benchmax.client._types import ChatResult, ModelError
from benchmax.envs import TerminationReason, Usage

_CONTEXT_PATTERN = re.compile(
    r"context_length_exceeded|context_budget_exceeded|maximum context length|context length|context window"
    r"|exceed_context_size|exceeds the available context|prompt is too long|too many tokens"
    r"|input is too long",
    re.IGNORECASE,
)
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_GATEWAY_STATUS = frozenset({502, 503, 504})
"""Answers that mean the endpoint (or the proxy before it) cannot serve anything right now."""
_ERROR_LINE = 300
"""Characters of an error that is not a JSON error object (an HTML page, plain text): one line."""
_MAX_ERROR_BODY = 2000
_MASK_MARGIN = 1024
"""Characters masked past the cut of an error text, so a credential echoed across the cut is masked whole."""


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

    def masked(self, headers: Mapping[str, str]) -> _Retryable:
        """This failure with any echo of the request's credentials in its message masked
        (a reply's own text, quoted in the message, may repeat the key)."""
        return _Retryable(
            self.cause,
            mask_secrets(str(self), request_secrets(headers)),
            reason=self.reason,
            delay=self.delay,
            kind=self.kind,
        )


async def _read_body(response: aiohttp.ClientResponse, limit: int, url: str) -> bytes:
    """The body, decompressed, read by the one bounded reader (:func:`benchmax.bounded.read_reply`);
    past ``limit`` bytes the request fails as a model error, not retried."""
    try:
        return await read_reply(response, limit=limit, what=f"from {url} (HTTP {response.status})")
    except ReplyTooLarge as exc:
        raise ModelError(TerminationReason.MODEL_ERROR, f"{exc} (max_reply_bytes)") from None


def _error_text(raw: bytes, headers: Mapping[str, str]) -> str:
    """What an error body says, in one line, any echo of the request's credentials masked.

    A JSON error's message is kept (at most 2,000 characters, whitespace folded);
    anything else (an HTML page, plain text, JSON of another shape) is summarised
    in one line of at most 300 characters, an HTML page by its title: never the
    whole page. The body is decoded first and masked after: a JSON body may
    spell the key with escapes (``\\u0073k-...``) that only decoding turns back
    into it. The text is masked a little past the cut, so an echo across it goes whole.
    """
    secrets = request_secrets(headers)
    window = _MAX_ERROR_BODY + _MASK_MARGIN
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        said = ": ".join(str(error.get(key))[:window] for key in ("code", "type", "message") if error.get(key))
    elif isinstance(error, str):
        said = error
    elif isinstance(data, dict) and isinstance(data.get("detail"), str):
        said = data["detail"]
    else:
        said = ""
    said = _SPACE.sub(" ", mask_secrets(said[:window], secrets)).strip()
    if said:
        return said[:_MAX_ERROR_BODY]
    # JSON of another shape is decoded and written again (escapes undone); anything else is read as text
    text = orjson.dumps(data).decode() if data is not None else raw[:window].decode("utf-8", "replace")
    return _one_line(mask_secrets(text[:window], secrets))


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


def _classify_error(status: int, text: str, retry_after: str | None) -> Exception:
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
        said = f" (error: {_error_text(orjson.dumps({'error': error}), {})})" if error else ""
        raise _malformed(f"no choices{said}")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("choices[0].message is missing")
    finish_reason = choice.get("finish_reason")
    usage_data = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    details = usage_data.get("prompt_tokens_details")
    try:
        usage = Usage(
            token_count(usage_data.get("prompt_tokens"), "usage.prompt_tokens"),
            token_count(usage_data.get("completion_tokens"), "usage.completion_tokens"),
            token_count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens")
            if isinstance(details, dict)
            else 0,
        )
        if data.get("prompt_token_ids"):
            prompt_ids = token_ids(data["prompt_token_ids"], "prompt_token_ids")
        else:
            prompt_ids = token_ids(choice.get("prompt_token_ids"), "choices[0].prompt_token_ids")
        return ChatResult(
            message=message,
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            usage=usage,
            prompt_token_ids=prompt_ids,
            completion_token_ids=token_ids(choice.get("token_ids"), "choices[0].token_ids"),
            completion_logprobs=_logprobs(choice.get("logprobs")),
            response_model=data["model"][:200] if isinstance(data.get("model"), str) else None,
        )
    except ValueError as exc:
        # A number out of range fails this reply here, never the store writer (SQLite keeps 64 bits).
        raise _malformed(str(exc)) from None


def _logprobs(value: object) -> tuple[float, ...] | None:
    if not isinstance(value, dict):
        return None
    content = value.get("content")
    if not isinstance(content, list):
        return None
    result = []
    for index, item in enumerate(content):
        if not isinstance(item, dict) or isinstance(item.get("logprob"), bool):
            return None
        number = item.get("logprob")
        if not isinstance(number, int | float):
            return None
        result.append(logprob(number, f"choices[0].logprobs.content[{index}].logprob"))
    return tuple(result)
