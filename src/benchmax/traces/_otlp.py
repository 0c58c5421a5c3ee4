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
from typing import Any, BinaryIO

import ijson
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


_FIRST_KEYS = (*_EXAMPLE_KEYS, "gen_ai.conversation.id")
"""The attributes a conversation takes from the first span of its trace that has them."""


@dataclass(slots=True)
class _Trace:
    """What a conversation needs of a trace, kept as its spans stream past (never the spans themselves):
    its last model call (by start, then end; the later one read on a tie) with that call's messages,
    the first value of each of ``_FIRST_KEYS``, the usage summed, and when it started and ended."""

    last: tuple[tuple[int, int], _Span, tuple[list[Any], list[Any], str | None]] | None = None
    firsts: dict[str, Any] = field(default_factory=dict)
    resource_firsts: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    started: int | None = None
    ended: int | None = None
    error: TraceFormatError | None = None

    def add(self, span: _Span) -> None:
        self.started = span.start if self.started is None else min(self.started, span.start)
        self.ended = span.end if self.ended is None else max(self.ended, span.end)
        self.input_tokens += _usage(span, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
        self.output_tokens += _usage(span, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
        for key in _FIRST_KEYS:
            if key not in self.firsts and span.attributes.get(key) is not None:
                self.firsts[key] = span.attributes[key]
            if key not in self.resource_firsts and span.resource.get(key) is not None:
                self.resource_firsts[key] = span.resource[key]
        if self.error is not None:
            return
        try:
            messages = _span_messages(span)
        except TraceFormatError as exc:
            self.error, self.last = exc, None
            return
        order = (span.start, span.end)
        if messages is not None and (self.last is None or order >= self.last[0]):
            # Its messages are read: what held them (and its events) is not kept, only the attributes
            # a conversation's metadata takes.
            span.attributes = {key: value for key, value in span.attributes.items() if not _message_key(key)}
            span.events = []
            self.last = (order, span, messages)

    def first(self, key: str) -> Any:
        value = self.firsts.get(key)
        return value if value is not None else self.resource_firsts.get(key)


def read_otlp_json(path: str | Path, *, skip_bad: bool = False) -> TraceRead:
    """Every trace of an OTLP/JSON file that holds GenAI spans, as one conversation each, in the
    order the traces first appear. A malformed line (or trace) raises :class:`TraceFormatError`
    naming the file, line and field; with ``skip_bad`` it is left out and listed instead.

    The file is streamed, never held: a line at a time, or (a file that is one JSON document
    over many lines) a span at a time, parsed as it is read (ijson); of each trace only what
    its conversation needs is kept (see ``_Trace``). Memory grows with the conversations
    found, not with the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TraceFormatError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} an import reads")
        with path.open("rb") as handle:
            skipped: list[SkippedLine] = []
            traces: dict[str, _Trace] = {}
            if not _starts_with_a_line_of_json(handle):
                try:
                    _read_document(path, handle, traces)
                except ijson.JSONError:
                    pass  # not one JSON document: read it line by line, as a line may still be one
                except TraceFormatError as exc:
                    if not skip_bad:
                        raise
                    return TraceRead((), (SkippedLine(f"{path}:1", str(exc)),))
                else:
                    return _conversations(path, traces, skipped, skip_bad)
                traces.clear()
            handle.seek(0)
            _read_lines(path, handle, traces, skipped, skip_bad)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return _conversations(path, traces, skipped, skip_bad)


def looks_like_otlp(path: str | Path) -> bool:
    """Whether the file starts as an OTLP/JSON export (a ``resourceSpans`` object)."""
    with Path(path).open("rb") as handle:
        head = handle.read(4096)
    return b'"resourceSpans"' in head or b'"resource_spans"' in head


def _starts_with_a_line_of_json(handle: BinaryIO) -> bool:
    """Whether the first line is a JSON object of its own (the file is JSON lines); rewinds."""
    line = handle.readline(MAX_LINE_BYTES + 1)
    handle.seek(0)
    if len(line) > MAX_LINE_BYTES:
        return False
    try:
        return isinstance(orjson.loads(line), Mapping)
    except orjson.JSONDecodeError:
        return False


def _read_lines(
    path: Path, handle: BinaryIO, traces: dict[str, _Trace], skipped: list[SkippedLine], skip_bad: bool
) -> None:
    number = 0
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        where = f"{path}:{number}"
        try:
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # the rest of the line, read in bounded pieces and dropped
                raise TraceFormatError(f"{where}: the line is longer than {MAX_LINE_BYTES} bytes")
            if not line.strip():
                continue
            try:
                document = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(f"{where}: not valid JSON ({exc})") from None
            if not isinstance(document, Mapping) or not isinstance(document.get("resourceSpans"), list):
                raise TraceFormatError(f"{where}: resourceSpans: an OTLP/JSON export needs a resourceSpans list")
            spans = list(_spans(document, where))
        except TraceFormatError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(where, str(exc)))
            continue
        for span in spans:
            traces.setdefault(span.trace, _Trace()).add(span)


_RESOURCE_ITEM = "resourceSpans.item"
_SCOPE_ITEM = "resourceSpans.item.scopeSpans.item"
_SPAN_ITEM = "resourceSpans.item.scopeSpans.item.spans.item"


def _read_document(path: Path, handle: BinaryIO, traces: dict[str, _Trace]) -> None:
    """A file that is one ``ExportTraceServiceRequest``, parsed as it is read, a span at a time.

    Raises ``ijson.JSONError`` for a file that is not one JSON object (the caller then reads it
    line by line), and :class:`TraceFormatError`, naming the field, for one of the wrong shape.
    """
    where = f"{path}:1"
    events = ijson.parse(handle, use_float=True)
    first = next(events, None)
    if first is None or first[1] != "start_map":
        raise ijson.JSONError("not a JSON object")
    r = s = n = -1
    resource: dict[str, Any] | None = None
    waiting: list[tuple[Mapping[str, Any], str]] = []
    spans_seen = found = False

    def take(span: Mapping[str, Any], span_at: str) -> None:
        made = _span(span, resource or {}, where, span_at)
        if made is not None:
            traces.setdefault(made.trace, _Trace()).add(made)

    for prefix, event, value in events:
        if prefix == "resourceSpans" and event in ("start_array", "start_map", "string", "number", "boolean", "null"):
            if event != "start_array":
                raise TraceFormatError(f"{where}: resourceSpans: an OTLP/JSON export needs a resourceSpans list")
            found = True
        elif prefix == _RESOURCE_ITEM:
            if event == "start_map":
                r, s, resource, waiting = r + 1, -1, None, []
            elif event == "end_map":
                for span, span_at in waiting:  # spans written before their resource
                    take(span, span_at)
                waiting = []
            elif event not in ("map_key",):
                raise TraceFormatError(f"{where}: resourceSpans[{r + 1}]: must be an object")
        elif prefix == f"{_RESOURCE_ITEM}.resource" and event == "start_map":
            built = _build(events, event, value)
            attributes = built.get("attributes") if isinstance(built, Mapping) else None
            resource = _attributes(attributes, f"{where}: resourceSpans[{r}].resource.attributes")
            for span, span_at in waiting:
                take(span, span_at)
            waiting = []
        elif prefix == _SCOPE_ITEM:
            if event == "start_map":
                s, n, spans_seen = s + 1, -1, False
            elif event == "end_map" and not spans_seen:
                raise TraceFormatError(f"{where}: resourceSpans[{r}].scopeSpans[{s}].spans: must be a list")
            elif event not in ("map_key", "end_map"):
                raise TraceFormatError(f"{where}: resourceSpans[{r}].scopeSpans[{s + 1}].spans: must be a list")
        elif prefix == f"{_SCOPE_ITEM}.spans" and event in ("start_array", "start_map", "string", "number", "null"):
            if event != "start_array":
                raise TraceFormatError(f"{where}: resourceSpans[{r}].scopeSpans[{s}].spans: must be a list")
            spans_seen = True
        elif prefix == _SPAN_ITEM and event not in ("end_array",):
            n += 1
            span_at = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
            span = _build(events, event, value)
            if not isinstance(span, Mapping):
                raise TraceFormatError(f"{where}: {span_at}: must be an object")
            if resource is None:
                waiting.append((span, span_at))
            else:
                take(span, span_at)
    if not found:
        raise TraceFormatError(f"{where}: resourceSpans: an OTLP/JSON export needs a resourceSpans list")


def _build(events: Iterator[tuple[str, str, Any]], event: str, value: Any) -> Any:
    """The JSON value that starts with ``event``, built from the events that follow it."""
    builder = ijson.ObjectBuilder()
    builder.event(event, value)
    if event not in ("start_map", "start_array"):
        return builder.value
    depth = 1
    for _, event, value in events:
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return builder.value
    raise ijson.IncompleteJSONError("the file ends inside a value")


def _conversations(path: Path, traces: dict[str, _Trace], skipped: list[SkippedLine], skip_bad: bool) -> TraceRead:
    conversations = []
    for trace_id in list(traces):
        trace = traces.pop(trace_id)  # what it held goes as its conversation is made
        try:
            if trace.error is not None:
                raise trace.error
            conversation = _conversation(path, trace_id, trace)
        except TraceFormatError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(f"{path} trace {trace_id}", str(exc)))
            continue
        if conversation is not None:
            conversations.append(conversation)
    return TraceRead(tuple(conversations), tuple(skipped))


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
                made = _span(span, resource_attributes, where, span_at)
                if made is not None:
                    yield made


def _span(span: Mapping[str, Any], resource: dict[str, Any], where: str, span_at: str) -> _Span | None:
    """One span of the export; ``None`` for one that is neither a model call nor names the example."""
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
        return None
    trace = span.get("traceId")
    if not isinstance(trace, str) or not trace:
        raise TraceFormatError(f"{where}: {span_at}.traceId: a GenAI span needs its trace id")
    return _Span(
        where=f"{where}: {span_at}",
        trace=trace[:128],
        start=_nanos(span.get("startTimeUnixNano"), f"{where}: {span_at}.startTimeUnixNano"),
        end=_nanos(span.get("endTimeUnixNano"), f"{where}: {span_at}.endTimeUnixNano"),
        attributes=attributes,
        events=events,
        resource=resource,
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
    if trace.last is None:
        return None
    _, last, (inputs, outputs, finish) = trace.last
    where = f"{path} trace {trace_id}"
    messages = check_messages([*inputs, *outputs], where, f"{last.where}: messages")
    attributes = {**last.resource, **last.attributes}
    example = next((value for key in _EXAMPLE_KEYS if (value := trace.first(key)) is not None), None)
    reasons = last.attributes.get("gen_ai.response.finish_reasons")
    if finish is None and isinstance(reasons, list) and reasons:
        finish = str(reasons[0])
    metadata = {
        key: value
        for key, value in attributes.items()
        if key.startswith("gen_ai.") and isinstance(value, str | int) and not _message_key(key)
    }
    return ImportedConversation(
        source=where,
        messages=messages,
        prompt_count=prompt_count(messages, where),
        conversation_id=optional_text(trace.first("gen_ai.conversation.id") or trace_id, f"{where}: conversation"),
        example_id=optional_text(example, f"{where}: example_id"),
        model=optional_text(
            attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model"), f"{where}: model"
        ),
        system=optional_text(attributes.get("gen_ai.system") or attributes.get("gen_ai.provider.name"), where),
        finish_reason=optional_text(finish, f"{where}: finish_reason", 64),
        input_tokens=trace.input_tokens,
        output_tokens=trace.output_tokens,
        started_at=(trace.started or 0) / 1e9 or None,
        ended_at=(trace.ended or 0) / 1e9 or None,
        metadata=bounded_metadata({key: metadata[key] for key in sorted(metadata)[:64]}, where),
    )


def _message_key(key: str) -> bool:
    """Whether an attribute holds a call's messages (never metadata: the messages are read from it)."""
    return key.startswith(("gen_ai.input", "gen_ai.output")) or key in ("gen_ai.prompt", "gen_ai.completion")


def _usage(span: _Span, *keys: str) -> int:
    """A span's token count under the first of ``keys`` it has; 0 for none, or for one out of range."""
    value = next((span.attributes[key] for key in keys if key in span.attributes), 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**40 else 0


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
