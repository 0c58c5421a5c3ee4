"""OTLP/JSON trace files with GenAI semantic-convention spans, one conversation per trace.

Read as the OpenTelemetry collector's file exporter writes them (one
``ExportTraceServiceRequest`` per line, or a whole file holding one):
``resourceSpans`` / ``scopeSpans`` / ``spans``, each span's ``attributes`` a list
of ``{key, value: AnyValue}``. A span is a model call when it carries ``gen_ai.*``
attributes; its messages are read from whichever form the instrumentation wrote:

- ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and
  ``gen_ai.system_instructions``): JSON, parts form (``parts: [{type: text,
  content}, {type: tool_call, ...}, {type: tool_call_response, ...}]``) or chat form;
- ``gen_ai.prompt`` / ``gen_ai.completion``: JSON message lists, as attributes, as
  attributes of the ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events,
  or flattened (``gen_ai.prompt.0.role``, ``gen_ai.prompt.0.content``, ...);
- the ``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice`` events.

A trace is one rollout: its last model call's input (the whole history an agent
sends each call) and output are the transcript; token usage is summed over the
trace's calls. Trace and span ids are kept opaque (hex or base64 alike).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchmax.traces._records import (
    MAX_LINE_BYTES,
    ImportedConversation,
    SkippedLine,
    TraceFormatError,
    TraceRead,
    bounded_metadata,
    check_messages,
    optional_text,
    prompt_count,
)

MAX_FILE_BYTES = 1024 * 1024 * 1024
_ROLE_EVENTS = {f"gen_ai.{role}.message": role for role in ("system", "user", "assistant", "tool")}
_FLAT = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(role|content|tool_call_id|name)$")
_EXAMPLE_KEYS = ("benchmax.example_id", "example_id")


@dataclass(slots=True)
class _Span:
    where: str
    trace: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass(slots=True)
class _Trace:
    spans: list[_Span] = field(default_factory=list)


def read_otlp_json(path: str | Path, *, skip_bad: bool = False) -> TraceRead:
    """Every trace of an OTLP/JSON file that holds GenAI spans, as one conversation each, in the
    order the traces first appear. A malformed line (or trace) raises :class:`TraceFormatError`
    naming the file, line and field; with ``skip_bad`` it is left out and listed instead."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TraceFormatError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} an import reads")
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    skipped: list[SkippedLine] = []
    traces: dict[str, _Trace] = {}
    for number, document in _documents(path, data, skipped, skip_bad):
        where = f"{path}:{number}"
        try:
            spans = list(_spans(document, where))
        except TraceFormatError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(where, str(exc)))
            continue
        for span in spans:
            traces.setdefault(span.trace, _Trace()).spans.append(span)
    conversations = []
    for trace_id, trace in traces.items():
        try:
            conversation = _conversation(path, trace_id, trace)
        except TraceFormatError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(f"{path} trace {trace_id}", str(exc)))
            continue
        if conversation is not None:
            conversations.append(conversation)
    return TraceRead(tuple(conversations), tuple(skipped))


def looks_like_otlp(path: str | Path) -> bool:
    """Whether the file starts as an OTLP/JSON export (a ``resourceSpans`` object)."""
    with Path(path).open("rb") as handle:
        head = handle.read(4096)
    return b'"resourceSpans"' in head or b'"resource_spans"' in head


def _documents(
    path: Path, data: bytes, skipped: list[SkippedLine], skip_bad: bool
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    if isinstance(whole, Mapping):
        yield 1, whole
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            if len(line) > MAX_LINE_BYTES:
                raise TraceFormatError(f"{where}: the line is longer than {MAX_LINE_BYTES} bytes")
            try:
                document = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(f"{where}: not valid JSON ({exc})") from None
            if not isinstance(document, Mapping) or not isinstance(document.get("resourceSpans"), list):
                raise TraceFormatError(f"{where}: resourceSpans: an OTLP/JSON export needs a resourceSpans list")
        except TraceFormatError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(where, str(exc)))
            continue
        yield number, document


def _spans(document: Mapping[str, Any], where: str) -> Iterator[_Span]:
    resource_spans = document.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise TraceFormatError(f"{where}: resourceSpans: an OTLP/JSON export needs a resourceSpans list")
    for r, item in enumerate(resource_spans):
        at = f"resourceSpans[{r}]"
        if not isinstance(item, Mapping):
            raise TraceFormatError(f"{where}: {at}: must be an object")
        resource = item.get("resource") or {}
        resource_attributes = _attributes(resource.get("attributes"), f"{where}: {at}.resource.attributes")
        for s, scope in enumerate(item.get("scopeSpans") or ()):
            spans = scope.get("spans") if isinstance(scope, Mapping) else None
            if not isinstance(spans, list):
                raise TraceFormatError(f"{where}: {at}.scopeSpans[{s}].spans: must be a list")
            for n, span in enumerate(spans):
                span_at = f"{at}.scopeSpans[{s}].spans[{n}]"
                if not isinstance(span, Mapping):
                    raise TraceFormatError(f"{where}: {span_at}: must be an object")
                attributes = _attributes(span.get("attributes"), f"{where}: {span_at}.attributes")
                events = []
                for e, event in enumerate(span.get("events") or ()):
                    if not isinstance(event, Mapping):
                        raise TraceFormatError(f"{where}: {span_at}.events[{e}]: must be an object")
                    event_attributes = _attributes(event.get("attributes"), f"{where}: {span_at}.events[{e}]")
                    events.append((str(event.get("name") or ""), event_attributes))
                if not any(key.startswith("gen_ai.") or key in _EXAMPLE_KEYS for key in attributes) and not any(
                    name.startswith("gen_ai.") for name, _ in events
                ):
                    continue  # not a model call, nor the span that names the example
                trace = span.get("traceId")
                if not isinstance(trace, str) or not trace:
                    raise TraceFormatError(f"{where}: {span_at}.traceId: a GenAI span needs its trace id")
                yield _Span(
                    where=f"{where}: {span_at}",
                    trace=trace[:128],
                    start=_nanos(span.get("startTimeUnixNano"), f"{where}: {span_at}.startTimeUnixNano"),
                    end=_nanos(span.get("endTimeUnixNano"), f"{where}: {span_at}.endTimeUnixNano"),
                    attributes=attributes,
                    events=events,
                    resource=resource_attributes,
                )


def _attributes(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise TraceFormatError(f"{where}: must be a list of {{key, value}}")
    found = {}
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise TraceFormatError(f"{where}[{index}]: an attribute needs a string key")
        found[item["key"]] = _any_value(item.get("value"), f"{where}[{index}] ({item['key']}).value")
    return found


def _any_value(value: object, where: str) -> Any:
    """An OTLP ``AnyValue`` as plain JSON (``intValue`` may be a string, as the proto JSON mapping writes it)."""
    if value is None or value == {}:
        return None
    if not isinstance(value, Mapping) or len(value) != 1:
        raise TraceFormatError(f"{where}: must be an AnyValue (one of stringValue, intValue, ...)")
    kind, item = next(iter(value.items()))
    if kind == "stringValue" and isinstance(item, str):
        return item
    if kind == "boolValue" and isinstance(item, bool):
        return item
    if kind == "intValue" and isinstance(item, int | str) and not isinstance(item, bool):
        try:
            return int(item)
        except ValueError:
            pass
    elif kind == "doubleValue" and isinstance(item, int | float | str) and not isinstance(item, bool):
        try:
            return float(item)
        except ValueError:
            pass
    elif kind == "arrayValue" and isinstance(item, Mapping):
        return [_any_value(part, f"{where}.arrayValue[{i}]") for i, part in enumerate(item.get("values") or ())]
    elif kind == "kvlistValue" and isinstance(item, Mapping):
        return _attributes(item.get("values"), f"{where}.kvlistValue")
    elif kind == "bytesValue" and isinstance(item, str):
        return item
    raise TraceFormatError(f"{where}: {kind} holds {type(item).__name__}, which it cannot")


def _nanos(value: object, where: str) -> int:
    if value is None:
        return 0
    try:
        nanos = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else -1
    except ValueError:
        nanos = -1
    if nanos < 0:
        raise TraceFormatError(f"{where}: must be nanoseconds since the epoch")
    return nanos


def _conversation(path: Path, trace_id: str, trace: _Trace) -> ImportedConversation | None:
    calls = []
    for span in sorted(trace.spans, key=lambda item: (item.start, item.end)):
        messages = _span_messages(span)
        if messages is not None:
            calls.append((span, messages))
    if not calls:
        return None
    last, (inputs, outputs, finish) = calls[-1]
    where = f"{path} trace {trace_id}"
    messages = check_messages([*inputs, *outputs], where, f"{last.where}: messages")
    attributes = {**last.resource, **last.attributes}
    example = next((span_attr for key in _EXAMPLE_KEYS if (span_attr := _first(trace, key)) is not None), None)
    reasons = last.attributes.get("gen_ai.response.finish_reasons")
    if finish is None and isinstance(reasons, list) and reasons:
        finish = str(reasons[0])
    metadata = {
        key: value for key, value in attributes.items() if key.startswith("gen_ai.") and isinstance(value, str | int)
    }
    metadata = {key: value for key, value in metadata.items() if not key.startswith(("gen_ai.input", "gen_ai.output"))}
    metadata = {key: value for key, value in metadata.items() if key not in ("gen_ai.prompt", "gen_ai.completion")}
    return ImportedConversation(
        source=where,
        messages=messages,
        prompt_count=prompt_count(messages, where),
        conversation_id=optional_text(_first(trace, "gen_ai.conversation.id") or trace_id, f"{where}: conversation"),
        example_id=optional_text(example, f"{where}: example_id"),
        model=optional_text(
            attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model"), f"{where}: model"
        ),
        system=optional_text(attributes.get("gen_ai.system") or attributes.get("gen_ai.provider.name"), where),
        finish_reason=optional_text(finish, f"{where}: finish_reason", 64),
        input_tokens=_usage(trace, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        output_tokens=_usage(trace, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        started_at=min(span.start for span in trace.spans) / 1e9 or None,
        ended_at=max(span.end for span in trace.spans) / 1e9 or None,
        metadata=bounded_metadata({key: metadata[key] for key in sorted(metadata)[:64]}, where),
    )


def _first(trace: _Trace, key: str) -> Any:
    for span in trace.spans:
        if span.attributes.get(key) is not None:
            return span.attributes[key]
    for span in trace.spans:
        if span.resource.get(key) is not None:
            return span.resource[key]
    return None


def _usage(trace: _Trace, *keys: str) -> int:
    total = 0
    for span in trace.spans:
        value = next((span.attributes[key] for key in keys if key in span.attributes), 0)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**40:
            total += value
    return total


def _span_messages(span: _Span) -> tuple[list[Any], list[Any], str | None] | None:
    """The call's input and output messages, and its finish reason; ``None`` for a span with none."""
    attributes = span.attributes
    where = span.where
    inputs: list[Any] = []
    outputs: list[Any] = []
    finish = None
    if "gen_ai.input.messages" in attributes or "gen_ai.output.messages" in attributes:
        instructions = attributes.get("gen_ai.system_instructions")
        if instructions is not None:
            parts = _json(instructions, f"{where}.attributes gen_ai.system_instructions")
            inputs.append({"role": "system", "content": _parts_text(parts if isinstance(parts, list) else [parts])})
        for message in _json_list(attributes.get("gen_ai.input.messages"), f"{where}.attributes gen_ai.input.messages"):
            inputs.extend(_from_parts(message, f"{where}.attributes gen_ai.input.messages"))
        output = _json_list(attributes.get("gen_ai.output.messages"), f"{where}.attributes gen_ai.output.messages")
        for message in output[:1]:
            outputs.extend(_from_parts(message, f"{where}.attributes gen_ai.output.messages"))
            if isinstance(message, Mapping) and isinstance(message.get("finish_reason"), str):
                finish = message["finish_reason"]
        return inputs, outputs, finish
    events = dict(span.events)
    prompt = attributes.get("gen_ai.prompt", events.get("gen_ai.content.prompt", {}).get("gen_ai.prompt"))
    completion = attributes.get(
        "gen_ai.completion", events.get("gen_ai.content.completion", {}).get("gen_ai.completion")
    )
    if prompt is not None or completion is not None:
        inputs = _json_list(prompt, f"{where} gen_ai.prompt")
        completed = _json(completion, f"{where} gen_ai.completion") if completion is not None else []
        outputs = [{"role": "assistant", "content": completed}] if isinstance(completed, str) else list(completed)[:1]
        return inputs, outputs, None
    flat: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _FLAT.match(key)
        if match:
            flat.setdefault((match.group(1), int(match.group(2))), {})[match.group(3)] = value
    if flat:
        inputs = [flat[key] for key in sorted(key for key in flat if key[0] == "prompt")]
        outputs = [{"role": "assistant", **flat[key]} for key in sorted(key for key in flat if key[0] == "completion")]
        return inputs, outputs[:1], None
    for name, event in span.events:
        if name in _ROLE_EVENTS:
            inputs.append(_event_message(_ROLE_EVENTS[name], event, f"{where} event {name}"))
        elif name == "gen_ai.choice":
            outputs.append(_event_message("assistant", event, f"{where} event {name}"))
            finish = event.get("finish_reason") if isinstance(event.get("finish_reason"), str) else finish
    if not inputs and not outputs:
        return None
    return inputs, outputs[:1], finish


def _event_message(role: str, event: Mapping[str, Any], where: str) -> dict[str, Any]:
    body = event.get("message", event.get("gen_ai.event.content", event.get("content")))
    if isinstance(body, str) and body[:1] in "{[":
        body = _json(body, where)
    if isinstance(body, Mapping):
        message = {"role": body.get("role") or role, **{k: v for k, v in body.items() if k != "role"}}
    else:
        message = {"role": role, "content": body}
    for key in ("tool_call_id", "id"):
        if isinstance(event.get(key), str) and role == "tool":
            message.setdefault("tool_call_id", event[key])
    return message


def _json(value: object, where: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(f"{where}: not valid JSON ({exc})") from None


def _json_list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    parsed = _json(value, where)
    if not isinstance(parsed, list):
        raise TraceFormatError(f"{where}: must be a JSON list of messages")
    return parsed


def _from_parts(message: object, where: str) -> list[dict[str, Any]]:
    """A semantic-convention message (``role`` and ``parts``) in chat form; a chat-form message as is.
    A tool's response parts become ``tool`` messages, one per call answered."""
    if not isinstance(message, Mapping):
        raise TraceFormatError(f"{where}: a message must be a JSON object")
    if "parts" not in message:
        return [dict(message)]
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise TraceFormatError(f"{where}: parts must be a list")
    role = message.get("role")
    responses = [part for part in parts if isinstance(part, Mapping) and part.get("type") == "tool_call_response"]
    if responses:
        return [
            {
                "role": "tool",
                "tool_call_id": str(part.get("id") or ""),
                "content": _text_of(part.get("response")),
            }
            for part in responses
        ]
    result: dict[str, Any] = {"role": role, "content": _parts_text(parts) or None}
    calls = [part for part in parts if isinstance(part, Mapping) and part.get("type") == "tool_call"]
    if calls:
        result["tool_calls"] = [
            {
                "id": str(part.get("id") or f"call_{i}"),
                "function": {"name": part.get("name"), "arguments": part.get("arguments")},
            }
            for i, part in enumerate(calls)
        ]
    return [result]


def _parts_text(parts: list[Any]) -> str:
    texts = []
    for part in parts:
        if isinstance(part, Mapping) and part.get("type") in ("text", None) and "content" in part:
            texts.append(_text_of(part["content"]))
        elif isinstance(part, str):
            texts.append(part)
    return "".join(texts)


def _text_of(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)
