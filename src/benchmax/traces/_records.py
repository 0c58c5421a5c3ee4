"""The record every reader produces, the error a bad input raises, and the bounds on what is read.

Recorded traffic is untrusted: a line, a message and the metadata kept from it
are bounded here, before anything reaches the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmax.envs import CHAT_ROLES, Messages, Tool, truncate_text
from benchmax.errors import BenchmaxError

MAX_LINE_BYTES = 32 * 1024 * 1024
"""A JSONL line (one conversation) or an OTLP/JSON file past this is refused."""
MAX_MESSAGES = 10_000
"""Messages in one conversation."""
MAX_CONTENT_CHARS = 200_000
"""A message's text past this is cut (and the cut marked), as the engine cuts a model reply."""
MAX_METADATA_BYTES = 64 * 1024
"""The metadata kept with a conversation (as JSON)."""


class TraceFormatError(BenchmaxError, ValueError):
    """Recorded traffic that cannot be read: the message names the file, line and field."""


@dataclass(frozen=True, slots=True)
class ImportedConversation:
    """One recorded conversation, ready to become a rollout.

    ``messages`` is the whole transcript (prompt and model turns) in chat form;
    ``prompt_count`` how many of them were the prompt (the messages before the
    first assistant turn). ``example_id`` is the dataset example the recording
    says it answered, when it says so. ``source`` says where it was read
    (``FILE:LINE``, or ``FILE trace ID`` for a trace).
    """

    source: str
    messages: Messages
    prompt_count: int
    conversation_id: str | None = None
    example_id: str | None = None
    tools: tuple[Tool, ...] = ()
    model: str | None = None
    system: str | None = None
    """``gen_ai.system`` / the provider, when recorded."""
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> Messages:
        return self.messages[: self.prompt_count]


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line ``--skip-bad`` left out, and why."""

    where: str
    reason: str


@dataclass(frozen=True, slots=True)
class TraceRead:
    """What a reader found: the conversations, and the lines skipped (only with ``skip_bad``)."""

    conversations: tuple[ImportedConversation, ...]
    skipped: tuple[SkippedLine, ...] = ()


def truncate(text: str, max_chars: int = MAX_CONTENT_CHARS) -> str:
    return truncate_text(text, max_chars)


def check_messages(value: object, where: str, field_name: str = "messages") -> Messages:
    """Chat messages as recorded, checked and bounded; the error names the message and field."""
    if not isinstance(value, list) or not value:
        raise TraceFormatError(f"{where}: {field_name} must be a non-empty list of chat messages")
    if len(value) > MAX_MESSAGES:
        raise TraceFormatError(f"{where}: {field_name} holds {len(value)} messages, more than {MAX_MESSAGES}")
    messages: Messages = []
    for index, message in enumerate(value):
        at = f"{where}: {field_name}[{index}]"
        if not isinstance(message, Mapping):
            raise TraceFormatError(f"{at}: a message must be a JSON object, got {type(message).__name__}")
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise TraceFormatError(f"{at}.role: {str(role)[:80]!r} is not a chat role ({', '.join(CHAT_ROLES)})")
        kept: dict[str, Any] = {"role": role, "content": _content(message.get("content"), f"{at}.content")}
        for key in ("name", "tool_call_id"):
            if isinstance(message.get(key), str):
                kept[key] = message[key][:200]
        calls = message.get("tool_calls")
        if calls is not None:
            kept["tool_calls"] = _tool_calls(calls, f"{at}.tool_calls")
        messages.append(kept)
    return messages


def _content(value: object, at: str) -> str | list[Any] | None:
    if value is None or isinstance(value, str):
        return None if value is None else truncate(value)
    if isinstance(value, list):
        parts = []
        for index, part in enumerate(value):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise TraceFormatError(f"{at}[{index}]: a content part must be an object with a 'type'")
            kept = dict(part)
            if isinstance(kept.get("text"), str):
                kept["text"] = truncate(kept["text"])
            parts.append(kept)
        return parts
    raise TraceFormatError(f"{at}: must be a string, a list of content parts or null, got {type(value).__name__}")


def _tool_calls(value: object, at: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise TraceFormatError(f"{at}: must be a list")
    calls = []
    for index, call in enumerate(value):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise TraceFormatError(f"{at}[{index}].function.name: a tool call needs a function name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            try:
                arguments = orjson.dumps(arguments if arguments is not None else {}).decode()
            except TypeError:
                raise TraceFormatError(f"{at}[{index}].function.arguments: not JSON") from None
        call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{index}"
        calls.append(
            {
                "id": call_id[:200],
                "type": "function",
                "function": {"name": function["name"][:200], "arguments": truncate(arguments)},
            }
        )
    return calls


def prompt_count(messages: Messages, where: str) -> int:
    """How many messages come before the first assistant turn (the prompt); a recording with no
    assistant turn or no prompt is refused, since there is nothing to score or nothing it answered."""
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            if index == 0:
                raise TraceFormatError(f"{where}: messages: the first message is the assistant's; no prompt")
            return index
    raise TraceFormatError(f"{where}: messages: no assistant turn (nothing the model said to score)")


def bounded_metadata(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TraceFormatError(f"{where}: metadata must be a JSON object, got {type(value).__name__}")
    try:
        size = len(orjson.dumps(value))
    except TypeError:
        raise TraceFormatError(f"{where}: metadata is not JSON") from None
    if size > MAX_METADATA_BYTES:
        raise TraceFormatError(f"{where}: metadata is {size} bytes, more than {MAX_METADATA_BYTES}")
    return {str(key): item for key, item in value.items()}


def optional_text(value: object, where: str, limit: int = 512) -> str | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise TraceFormatError(f"{where}: must be a non-empty string")
    if len(value) > limit:
        raise TraceFormatError(f"{where}: longer than {limit} characters")
    return value
