"""OpenAI-format chat logs (JSONL, one conversation per line) as :class:`ImportedConversation` records.

Two shapes are read, the ones chat logs are kept in: ``{"messages": [...]}``
(with optional ``tools``, ``id``, ``example_id``, ``model``, ``metadata``), as
OpenAI's fine-tuning and eval files and most loggers write them; and
``{"request": {...}, "response": {...}}``, a ``chat.completions`` request body
beside the ``ChatCompletion`` it got, as a recording proxy writes them (the
response's first choice is the last turn).
"""

from __future__ import annotations

from collections.abc import Mapping
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


def read_chat_jsonl(path: str | Path, *, skip_bad: bool = False) -> TraceRead:
    """Every conversation of a chat-log JSONL file, in file order.

    A malformed line raises :class:`TraceFormatError` naming ``FILE:LINE`` and the
    field; with ``skip_bad`` it is left out and listed in ``TraceRead.skipped``.
    Blank lines are ignored.
    """
    path = Path(path)
    conversations: list[ImportedConversation] = []
    skipped: list[SkippedLine] = []
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with handle:
        for number, raw in enumerate(_lines(handle), start=1):
            where = f"{path}:{number}"
            if not raw.strip():
                continue
            try:
                conversations.append(parse_chat_record(raw, where))
            except TraceFormatError as exc:
                if not skip_bad:
                    raise
                skipped.append(SkippedLine(where, str(exc)))
    return TraceRead(tuple(conversations), tuple(skipped))


def _lines(handle: Any) -> Any:
    """The file's lines; one past :data:`MAX_LINE_BYTES` is cut to that (and then refused as too long)."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:  # drop the rest of the over-long line
                rest = handle.readline(MAX_LINE_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
            yield b"\x00too-long"
            continue
        yield line


def parse_chat_record(raw: bytes | str, where: str) -> ImportedConversation:
    """One JSONL line (either shape); ``where`` is its ``FILE:LINE`` for errors."""
    if raw == b"\x00too-long":
        raise TraceFormatError(f"{where}: the line is longer than {MAX_LINE_BYTES} bytes")
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(record, Mapping):
        raise TraceFormatError(f"{where}: a line must be a JSON object, got {type(record).__name__}")
    if "request" in record or "response" in record:
        return _pair(record, where)
    if "messages" not in record:
        raise TraceFormatError(f"{where}: a line needs 'messages' (a conversation) or 'request' and 'response'")
    messages = check_messages(record["messages"], where)
    metadata = bounded_metadata(record.get("metadata"), f"{where}: metadata")
    return ImportedConversation(
        source=where,
        messages=messages,
        prompt_count=prompt_count(messages, where),
        conversation_id=optional_text(record.get("id"), f"{where}: id"),
        example_id=_example_id(record, metadata, where),
        tools=_tools(record.get("tools"), f"{where}: tools"),
        model=optional_text(record.get("model"), f"{where}: model"),
        finish_reason=optional_text(record.get("finish_reason"), f"{where}: finish_reason", 64),
        input_tokens=_tokens(record.get("usage"), "prompt_tokens", where),
        output_tokens=_tokens(record.get("usage"), "completion_tokens", where),
        metadata=metadata,
    )


def _pair(record: Mapping[str, Any], where: str) -> ImportedConversation:
    request, response = record.get("request"), record.get("response")
    if not isinstance(request, Mapping):
        raise TraceFormatError(f"{where}: request must be a chat.completions request body (an object)")
    if not isinstance(response, Mapping):
        raise TraceFormatError(f"{where}: response must be a ChatCompletion (an object)")
    prompt = check_messages(request.get("messages"), where, "request.messages")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise TraceFormatError(f"{where}: response.choices must be a non-empty list of choices")
    choice = choices[0]
    reply = check_messages([choice.get("message")], where, "response.choices[0].message")
    if reply[0]["role"] != "assistant":
        raise TraceFormatError(f"{where}: response.choices[0].message.role must be 'assistant'")
    messages = [*prompt, *reply]
    metadata = bounded_metadata(record.get("metadata") or request.get("metadata"), f"{where}: metadata")
    created = response.get("created")
    usage = response.get("usage")
    return ImportedConversation(
        source=where,
        messages=messages,
        prompt_count=prompt_count(messages, where),
        conversation_id=optional_text(record.get("id") or response.get("id"), f"{where}: id"),
        example_id=_example_id(record, metadata, where),
        tools=_tools(request.get("tools"), f"{where}: request.tools"),
        model=optional_text(response.get("model") or request.get("model"), f"{where}: response.model"),
        finish_reason=optional_text(choice.get("finish_reason"), f"{where}: response.choices[0].finish_reason", 64),
        input_tokens=_tokens(usage, "prompt_tokens", where, "response.usage"),
        output_tokens=_tokens(usage, "completion_tokens", where, "response.usage"),
        started_at=float(created) if isinstance(created, int | float) and not isinstance(created, bool) else None,
        metadata=metadata,
    )


def _example_id(record: Mapping[str, Any], metadata: Mapping[str, Any], where: str) -> str | None:
    """``example_id`` at the top level, else in ``metadata`` (OpenAI's request metadata holds strings)."""
    if record.get("example_id") is not None:
        return optional_text(record["example_id"], f"{where}: example_id")
    return optional_text(metadata.get("example_id"), f"{where}: metadata.example_id")


def _tools(value: object, where: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(tool, Mapping) for tool in value):
        raise TraceFormatError(f"{where}: must be a list of tool objects")
    return tuple(dict(tool) for tool in value)


def _tokens(usage: object, key: str, where: str, field_name: str = "usage") -> int:
    if usage is None:
        return 0
    if not isinstance(usage, Mapping):
        raise TraceFormatError(f"{where}: {field_name} must be an object")
    value = usage.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**40:
        raise TraceFormatError(f"{where}: {field_name}.{key} must be a token count (an integer >= 0)")
    return value
