"""Reading the model's answer out of a transcript."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def extract_completion_text(messages: Sequence[dict[str, Any]]) -> str:
    """The final assistant message's text; ``""`` unless the transcript ends with one.

    A transcript that ends on a tool result (the model ran out of turns) has no
    answer, so it scores as empty rather than as some earlier message.
    """
    if not messages:
        return ""
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return ""
    return content_text(last.get("content"))


def content_text(content: Any) -> str:
    """Flatten OpenAI message content (a string or a list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)
