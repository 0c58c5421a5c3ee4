"""The spans of a rollout, opened where the mechanisms run (the engine, the model client).

Every entry point starts with one check of the module's tracer: ``None`` (no endpoint
configured, the default) returns at once, so tracing off costs a function call and a
comparison per rollout, tool call and model call, and nothing is imported from the SDK.

A rollout's root span travels two ways: as the current OpenTelemetry context of the
rollout's task (so spans opened inside a tool or a reward nest under them), and on the
rollout's ``RolloutScope`` (``trace``), so a model call made for the rollout from another
task (the recording proxy forwards agent calls inside the rollout's scope, not its task)
still lands in the rollout's trace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson

from benchmax.envs import current_scope, truncate_text

try:  # the ``otel`` extra; without it tracing cannot be turned on (``start_telemetry`` says so)
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes, server_attributes
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:
    AVAILABLE = False
else:
    AVAILABLE = True

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

R = TypeVar("R")

MAX_CONTENT_CHARS = 64_000
"""Text kept per content attribute (``--otel-content``); longer is cut and marked."""
REWARD_PREFIX = "benchmax.reward."

_TRACER: Tracer | None = None
_CONTENT = False


def install(tracer: Tracer | None, content: bool) -> None:
    """Point the instrumentation at ``tracer`` (``None``: off)."""
    global _TRACER, _CONTENT
    _TRACER = tracer
    _CONTENT = content and tracer is not None


def tracer() -> Tracer | None:
    """The tracer the instrumentation uses now; ``None`` while tracing is off."""
    return _TRACER


def content_enabled() -> bool:
    return _CONTENT


def _error_status(kind: str, message: str) -> Status:
    """A failed span's status: its kind (an exception's class, a termination reason) and, only with
    ``--otel-content``, the message too. A message may quote what the model sent or a tool or server
    gave back (a tool error quoting its arguments, a 400 echoing the prompt): content, exported only
    when content export is on."""
    return Status(StatusCode.ERROR, f"{kind}: {message}"[:500] if _CONTENT else kind)


def _text(value: object) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return truncate_text(text, MAX_CONTENT_CHARS)


class _NoSpan:
    """What a span context manager is while tracing is off: enters to ``None``, does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class _CurrentSpan:
    """A child of the current span, current itself while the body runs; an exception marks it failed."""

    __slots__ = ("_attributes", "_kind", "_name", "_span", "_token")

    def __init__(self, name: str, attributes: Mapping[str, Any], kind: SpanKind) -> None:
        self._name = name
        self._attributes = attributes
        self._kind = kind
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        assert _TRACER is not None
        span = self._span = _TRACER.start_span(self._name, attributes=dict(self._attributes), kind=self._kind)
        self._token = otel_context.attach(otel_trace.set_span_in_context(span))
        return span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        span = self._span
        assert span is not None
        try:
            if exc is not None:
                span.set_attribute(error_attributes.ERROR_TYPE, type(exc).__qualname__)
                span.set_status(_error_status(type(exc).__name__, str(exc)))
            span.end()
        finally:
            otel_context.detach(self._token)  # type: ignore[arg-type]


def span(name: str, attributes: Mapping[str, Any] | None = None) -> _CurrentSpan | _NoSpan:
    """``with span(name):`` a stage of a rollout (its context, its reward) as a child of the current span."""
    if _TRACER is None:
        return _NO_SPAN
    return _CurrentSpan(name, attributes or {}, SpanKind.INTERNAL)


# The rollout's root.


def start_rollout(
    rollout_id: str, example_id: str, split: str, model: str, env: str | None = None
) -> tuple[Span, object] | None:
    """Open the rollout's trace (a new root, whatever span is current) and make it current; ``None`` when off.

    Returns the span and the token :func:`leave_rollout` gives back to the context.
    """
    if _TRACER is None:
        return None
    attributes: dict[str, Any] = {
        "benchmax.rollout.id": rollout_id,
        "benchmax.example.id": example_id,
        "benchmax.split": split,
        gen_ai.GEN_AI_REQUEST_MODEL: model,
    }
    if env is not None:
        attributes["benchmax.env"] = env
    root = _TRACER.start_span("rollout", context=otel_context.Context(), attributes=attributes)
    return root, otel_context.attach(otel_trace.set_span_in_context(root))


def leave_rollout(token: object) -> None:
    """The rollout's task stops running it: its root is no longer the current span (it stays open)."""
    otel_context.detach(token)  # type: ignore[arg-type]


def trace_id(root: Span) -> str:
    """The W3C form of the trace's id (32 hex digits), as a receiver shows it."""
    return format(root.get_span_context().trace_id, "032x")


def end_rollout(root: Span, *, reason: str, error: str | None, rewards: Mapping[str, float] | None) -> None:
    """Close the rollout's trace with how it ended: its reason, its reward components, its error."""
    root.set_attribute("benchmax.termination_reason", reason)
    for name, value in (rewards or {}).items():
        root.set_attribute(REWARD_PREFIX + name, float(value))
    if rewards:
        root.set_attribute("benchmax.reward", float(sum(rewards.values())))
    if error:
        root.set_attribute(error_attributes.ERROR_TYPE, reason)
        root.set_status(_error_status(reason, error))
    root.end()


@asynccontextmanager
async def traced_context(context: AbstractAsyncContextManager[Any]) -> AsyncIterator[Any]:
    """``context`` (an env's ``rollout_context``) with its enter and its exit each a span, as ``async with`` runs it."""
    with span("rollout_context enter"):
        value = await context.__aenter__()
    try:
        yield value
    except BaseException as exc:
        with span("rollout_context exit"):
            suppressed = await context.__aexit__(type(exc), exc, exc.__traceback__)
        if not suppressed:
            raise
    else:
        with span("rollout_context exit"):
            await context.__aexit__(None, None, None)


def group_span(roots: Sequence[Span | None]) -> _CurrentSpan | _NoSpan:
    """``compute_group_rewards`` once for a group: in the first sibling's trace, linked to the others' roots."""
    if _TRACER is None or not roots or roots[0] is None:
        return _NO_SPAN
    first = roots[0]
    links = [otel_trace.Link(root.get_span_context()) for root in roots[1:] if root is not None]
    return _GroupSpan(first, links)


class _GroupSpan(_CurrentSpan):
    __slots__ = ("_links", "_parent")

    def __init__(self, parent: Span, links: list[otel_trace.Link]) -> None:
        super().__init__("compute_group_rewards", {}, SpanKind.INTERNAL)
        self._parent = parent
        self._links = links

    def __enter__(self) -> Span:
        assert _TRACER is not None
        parent = otel_trace.set_span_in_context(self._parent)
        span = self._span = _TRACER.start_span(self._name, context=parent, links=self._links)
        self._token = otel_context.attach(otel_trace.set_span_in_context(span))
        return span


# Tool calls.


def tool_span(call_id: str, name: str, arguments: str) -> _CurrentSpan | _NoSpan:
    """``execute_tool {name}``: one tool call of the current rollout."""
    if _TRACER is None:
        return _NO_SPAN
    attributes: dict[str, Any] = {
        gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value,
        gen_ai.GEN_AI_TOOL_NAME: name,
        gen_ai.GEN_AI_TOOL_CALL_ID: call_id,
    }
    if _CONTENT:
        attributes[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] = _text(arguments)
    return _CurrentSpan(f"execute_tool {name}", attributes, SpanKind.INTERNAL)


def tool_result(active: Span | None, result: object, *, failed: str | None) -> None:
    """What the call gave back (with ``--otel-content``) and, when it failed, why."""
    if active is None:
        return
    if _CONTENT:
        active.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, _text(result))
    if failed is not None:
        fail_span(active, "tool_error", failed)


def fail_span(active: Span | None, kind: str, message: str) -> None:
    """Mark a stage failed where the engine catches the exception itself (a scoring hook's error)."""
    if active is None:
        return
    active.set_attribute(error_attributes.ERROR_TYPE, kind)
    active.set_status(_error_status(kind, message))


# Model calls.


CACHE_HIT = "benchmax.cache.hit"
"""On a model-call span answered by the response cache: nothing was sent, so no server attributes."""


class ChatReply(Protocol):
    """What a model-call span reads of a reply (``benchmax.client.ChatResult``; typed here as a
    protocol because the client package imports this one)."""

    @property
    def message(self) -> Mapping[str, Any]: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def usage(self) -> Any: ...
    @property
    def response_model(self) -> str | None: ...


def start_model_call(
    body: Mapping[str, Any], address: str | None, port: int | None, *, cache_hit: bool = False
) -> Span | None:
    """``chat {model}`` for a chat completion about to be sent; ``None`` when off.

    Its parent is the current span, unless the call is made for a rollout from outside
    that rollout's task (the scope's trace differs): then the rollout's root.
    """
    if _TRACER is None:
        return None
    model = str(body.get("model") or "")
    attributes: dict[str, Any] = {
        gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.CHAT.value,
        gen_ai.GEN_AI_REQUEST_MODEL: model,
    }
    if cache_hit:
        attributes[CACHE_HIT] = True
    if address:
        attributes[server_attributes.SERVER_ADDRESS] = address
    if port is not None:
        attributes[server_attributes.SERVER_PORT] = port
    for key, attribute in (
        ("temperature", gen_ai.GEN_AI_REQUEST_TEMPERATURE),
        ("max_tokens", gen_ai.GEN_AI_REQUEST_MAX_TOKENS),
        ("top_p", gen_ai.GEN_AI_REQUEST_TOP_P),
        ("seed", gen_ai.GEN_AI_REQUEST_SEED),
    ):
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[attribute] = value
    if _CONTENT and body.get("messages") is not None:
        attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = _text(body.get("messages"))
    parent = None
    root = current_scope().trace
    if root is not None:
        current = otel_trace.get_current_span().get_span_context()
        if current.trace_id != root.get_span_context().trace_id:
            parent = otel_trace.set_span_in_context(root)
    return _TRACER.start_span(f"chat {model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes)


def end_model_call(
    active: Span,
    *,
    response_model: str | None,
    finish_reason: str | None,
    input_tokens: int,
    output_tokens: int,
    message: Mapping[str, Any],
) -> None:
    if response_model:
        active.set_attribute(gen_ai.GEN_AI_RESPONSE_MODEL, response_model)
    active.set_attribute(gen_ai.GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
    active.set_attribute(gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)
    if finish_reason is not None:
        active.set_attribute(gen_ai.GEN_AI_RESPONSE_FINISH_REASONS, (finish_reason,))
    if _CONTENT:
        # a reply's message carries no role on the wire; the GenAI convention wants each message's
        active.set_attribute(gen_ai.GEN_AI_OUTPUT_MESSAGES, _text([{"role": "assistant", **message}]))
    active.end()


def finish_model_call(active: Span, reply: ChatReply) -> None:
    """Close a model-call span with what the reply says (its model, finish, token counts)."""
    end_model_call(
        active,
        response_model=reply.response_model,
        finish_reason=reply.finish_reason,
        input_tokens=reply.usage.prompt_tokens,
        output_tokens=reply.usage.completion_tokens,
        message=reply.message,
    )


def cached_model_call(body: Mapping[str, Any], reply: ChatReply) -> None:
    """A call the response cache answered: a span of its own (``benchmax.cache.hit=true``), so the
    rollout's trace shows every turn, with no server attributes (nothing was sent)."""
    if _TRACER is None:
        return
    active = start_model_call(body, None, None, cache_hit=True)
    assert active is not None
    finish_model_call(active, reply)


async def traced_model_call(
    body: Mapping[str, Any], address: str | None, port: int | None, send: Callable[[], Awaitable[R]]
) -> R:
    """Send one chat completion (``send``) inside its ``chat {model}`` span while tracing is on.

    The one way a model call is traced, whoever answers it (an HTTP server, the in-process
    policy): off, it is ``send()`` after a ``None`` check."""
    active = start_model_call(body, address, port)
    if active is None:
        return await send()
    try:
        result = await send()
    except BaseException as exc:
        fail_model_call(active, exc)
        raise
    finish_model_call(active, result)  # type: ignore[arg-type]
    return result


def fail_model_call(active: Span, exc: BaseException) -> None:
    active.set_attribute(error_attributes.ERROR_TYPE, str(getattr(exc, "reason", None) or type(exc).__qualname__))
    status = getattr(exc, "status", None)
    kind = type(exc).__name__ + (f" (HTTP {status})" if isinstance(status, int) else "")
    active.set_status(_error_status(kind, str(exc)))
    active.end()


# Env turns.


ENV_TURN_PREFIX = "benchmax.env_turn."


def env_turn_span(turn: int) -> _CurrentSpan | _NoSpan:
    """``env_response``: the env's answer to one assistant turn of the current rollout."""
    if _TRACER is None:
        return _NO_SPAN
    return _CurrentSpan("env_response", {ENV_TURN_PREFIX + "index": turn}, SpanKind.INTERNAL)


def env_turn_result(
    active: Span | None, *, done: bool, messages: int, rewards: Mapping[str, float] | None, observation: str
) -> None:
    """What the env answered: whether it ended the episode, its turn reward and (with ``--otel-content``) its text."""
    if active is None:
        return
    active.set_attribute(ENV_TURN_PREFIX + "done", done)
    active.set_attribute(ENV_TURN_PREFIX + "messages", messages)
    for name, value in (rewards or {}).items():
        active.set_attribute(REWARD_PREFIX + name, float(value))
    if _CONTENT and observation:
        active.set_attribute(ENV_TURN_PREFIX + "observation", _text(observation))
