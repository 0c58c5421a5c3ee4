"""The OpenAI wire format as the proxy speaks it: a request checked, a reply written, errors said.

The agent is untrusted: its request is checked field by field before anything is
forwarded, and every error the proxy answers is an OpenAI-style error object the
agent's SDK raises as an exception. Every proxy error carries ``x-should-retry:
false``: the model client behind the proxy already retried what was worth
retrying, and an SDK retrying a spent budget would only flood the proxy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from aiohttp import web

from benchmax.client import ChatResult, ModelError
from benchmax.envs import SamplingParams, TerminationReason

STREAM_FIELDS = frozenset({"stream", "stream_options"})
"""Fields the proxy answers itself: the model client takes whole replies and the proxy streams them."""
SAMPLING_FIELDS = frozenset({"messages", "tools", "tool_choice", "model", *STREAM_FIELDS})
"""Fields a recorded call keeps apart from its sampling fields."""

_NO_RETRY = {"x-should-retry": "false"}


class BadRequest(Exception):
    """A request the proxy refuses before forwarding it; ``status`` and ``code`` go to the agent."""

    def __init__(self, status: int, message: str, *, code: str | None = None, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.code = code
        self.kind = kind


def error_response(status: int, message: str, *, code: str | None, kind: str) -> web.Response:
    """An OpenAI-style error object, which the OpenAI SDKs raise as their status's exception."""
    payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json", headers=_NO_RETRY)


def refused(error: BadRequest) -> web.Response:
    return error_response(error.status, str(error), code=error.code, kind=error.kind)


def parse_request(raw: bytes) -> dict[str, Any]:
    """The agent's chat request, checked: a JSON object with a non-empty list of message objects."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, f"the request body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(item, dict) for item in messages):
        raise BadRequest(400, "'messages' must be a non-empty list of message objects", code="invalid_messages")
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(item, dict) for item in tools)):
        raise BadRequest(400, "'tools' must be a list of tool objects", code="invalid_tools")
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(400, "the proxy serves one choice per request ('n' must be 1)", code="unsupported_n")
    if "stream" in body and not isinstance(body["stream"], bool | None):
        raise BadRequest(400, "'stream' must be true or false", code="invalid_stream")
    return body


def upstream_body(body: Mapping[str, Any], model: str, sampling: SamplingParams | None) -> dict[str, Any]:
    """What is sent on: the agent's request for the run's model, the run's sampling over the agent's.

    The run's sampling wins where both set a field: it is what the run records as the
    rollout's sampling, and what a trainer asks for (token ids, logprobs) must reach
    the server whatever the agent's SDK sends.
    """
    sent = {key: value for key, value in body.items() if key not in STREAM_FIELDS}
    if sampling is not None:
        sent.update(sampling.to_body())
    sent["model"] = model
    sent["messages"] = body["messages"]
    return sent


def _usage(result: ChatResult) -> dict[str, Any]:
    usage = result.usage
    data: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens:
        data["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return data


def _message(result: ChatResult) -> dict[str, Any]:
    message = dict(result.message)
    message["role"] = "assistant"
    message.setdefault("content", None)
    return message


def completion(call_id: str, model: str, result: ChatResult) -> bytes:
    """The non-streaming reply."""
    choice = {"index": 0, "message": _message(result), "finish_reason": result.finish_reason, "logprobs": None}
    return orjson.dumps(
        {
            "id": call_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _usage(result),
        }
    )


def stream_events(call_id: str, model: str, result: ChatResult, *, include_usage: bool) -> Iterator[bytes]:
    """The reply as server-sent events, as OpenAI streams one: role, content, tool calls, finish, usage, DONE.

    The model client takes the whole reply before the proxy answers, so the stream
    carries it in a few chunks rather than token by token; SDKs assemble both alike.
    """
    created = int(time.time())
    head = {"id": call_id, "object": "chat.completion.chunk", "created": created, "model": model}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    message = _message(result)
    yield event({"role": "assistant", "content": ""})
    content = message.get("content")
    if isinstance(content, str) and content:
        yield event({"content": content})
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str) and message[key]:
            yield event({key: message[key]})
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for index, call in enumerate(calls):
            if isinstance(call, dict):
                yield event({"tool_calls": [{"index": index, **call}]})
    yield event({}, result.finish_reason)
    if include_usage:
        yield b"data: " + orjson.dumps({**head, "choices": [], "usage": _usage(result)}) + b"\n\n"
    yield b"data: [DONE]\n\n"


def model_error_response(error: ModelError) -> web.Response:
    """The client's failure as the agent sees it: a context overflow as OpenAI says one, the rest as a gateway error.

    The upstream's own 401/403 is the run's credential, not the agent's: it goes to
    the agent as a 502, so an agent never reads it as its own key being refused.
    """
    reason = error.reason
    if reason == TerminationReason.CONTEXT_EXCEEDED:
        return error_response(400, str(error), code="context_length_exceeded", kind="invalid_request_error")
    if reason == TerminationReason.TIMEOUT:
        return error_response(504, str(error), code=reason, kind="upstream_error")
    status = error.status
    if status is not None and 400 <= status < 500 and status not in (401, 403, 407):
        return error_response(status, str(error), code=reason, kind="upstream_error")
    return error_response(502, str(error), code=reason, kind="upstream_error")


def models_list(model: str) -> bytes:
    return orjson.dumps(
        {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "benchmax"}]}
    )
