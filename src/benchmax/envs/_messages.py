"""The message vocabulary: reading text out of OpenAI chat messages, and the shapes benchmax writes.

Every part of benchmax that flattens message content, reads a final answer,
builds a tool message or asks whether a tool call failed does it here, so the
reward helpers, the store, the inspector and the trainers agree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from benchmax.envs._errors import DatasetError
from benchmax.envs._records import Message, TurnRecord

CHAT_ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles OpenAI-compatible chat servers know."""


def content_text(content: Any) -> str:
    """OpenAI message content (a string, or a list of content parts) as plain text.

    Text parts are concatenated as the model would read them; image and other
    non-text parts contribute nothing.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def completion_text(completion: Sequence[Mapping[str, Any]] | str) -> str:
    """The final answer of a transcript, stripped; ``""`` unless it ends with an assistant message.

    A transcript that ends on a tool result (the model ran out of turns) has no
    answer, so it scores as empty rather than as some earlier message. A plain
    string is an answer already (0.2.x's ``extract_completion_text``).
    """
    if isinstance(completion, str):
        return completion.strip()
    if not completion:
        return ""
    last = completion[-1]
    if not isinstance(last, Mapping) or last.get("role") != "assistant":
        return ""
    return content_text(last.get("content")).strip()


def message_key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a message a chat template renders (role, text, tool call names and arguments,
    tool call id, name): equal keys, equal rendering.

    Whether a model call continues an earlier one is judged on these keys (an agent's
    calls become sequences, a trainer's policy picks the token state to extend), so an
    SDK that echoes a reply back with extra ``None`` fields (``refusal``, ``audio``...)
    or re-serialises tool arguments still continues its call.
    """
    calls = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(orjson.JSONDecodeError):
                arguments = orjson.loads(arguments)
        calls.append(
            (str(function.get("name") or ""), orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS, default=str))
        )
    return (
        str(message.get("role") or ""),
        content_text(message.get("content")),
        tuple(calls),
        message.get("tool_call_id"),
        message.get("name"),
    )


def tool_message(tool_call_id: str, content: str | list[Any]) -> Message:
    """The transcript message answering one tool call (0.2.x's keys)."""
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def tool_error_ids(turns: Iterable[TurnRecord | Mapping[str, Any]]) -> frozenset[str]:
    """The ids of every tool call whose result told the model of an error.

    Read from the turns' typed records (live :class:`TurnRecord` objects or their
    stored dict form), never from the result text: a tool may legitimately
    answer with text that starts with "error".
    """
    ids: set[str] = set()
    for turn in turns:
        errors = turn.get("tool_errors") if isinstance(turn, Mapping) else turn.tool_errors
        ids.update(str(call_id) for call_id in errors or ())
    return frozenset(ids)


def check_prompt_messages(payload: Any, *, where: str) -> None:
    """Raise :class:`DatasetError` unless ``payload`` holds usable ``prompt_messages``.

    Each message needs a string ``role`` (as in 0.2.x); ``content``, when
    present, is a string, a list of content parts or ``None``.
    """
    if payload.__class__ is not dict and not isinstance(payload, Mapping):  # exact types first: the hot path
        raise DatasetError(f"{where}: a BaseEnv example payload must be a JSON object, got {type(payload).__name__}")
    messages = payload.get("prompt_messages")
    if not isinstance(messages, list) or not messages:
        raise DatasetError(
            f"{where}: the payload needs a non-empty 'prompt_messages' list of {{role, content}} messages"
        )
    for index, message in enumerate(messages):
        if message.__class__ is not dict and not isinstance(message, Mapping):
            raise DatasetError(f"{where}: prompt_messages[{index}] must be an object")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise DatasetError(f"{where}: prompt_messages[{index}] needs a string 'role'")
        content = message.get("content")
        if not (content is None or isinstance(content, str | list)):
            raise DatasetError(
                f"{where}: prompt_messages[{index}].content must be a string or a "
                f"list of content parts, got {type(content).__name__}"
            )


def is_content_part(part: object) -> bool:
    """Whether ``part`` is an OpenAI content part a tool may return as is (text or an image)."""
    if not isinstance(part, Mapping):
        return False
    if part.get("type") == "text":
        return isinstance(part.get("text"), str)
    return part.get("type") == "image_url" and isinstance(part.get("image_url"), Mapping)


def truncate_text(text: str, max_chars: int) -> str:
    """At most ``max_chars`` of ``text`` (the cut is marked with how much was cut), as valid UTF-8.

    The one way benchmax bounds untrusted text (tool results, model replies, an agent's output,
    imported traces, span attributes). Text may hold lone surrogates (bytes decoded with
    ``surrogateescape``); they cannot be sent to a model or stored, so they become visible
    ``\\udc80`` escapes.
    """
    if len(text) > max_chars:
        text = f"{text[:max_chars]}…[truncated {len(text) - max_chars} chars]"
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
