"""Reading tool use out of a transcript: calls per tool, budget, required tools, errors.

Calls are read from the assistant messages' ``tool_calls`` and paired with the
tool messages that answer them (by ``tool_call_id``). A tool message whose text
starts with ``"error:"`` is an error: that is how the engine reports unknown
tools, bad arguments and :class:`~benchmax.envs.ToolError` to the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmax.rewards.text import content_text

_ERROR_PREFIX = "error:"


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One call the model made and what came back (``None``: no result in the transcript)."""

    id: str
    name: str
    arguments: str
    result: str | None

    @property
    def error(self) -> bool:
        return self.result is not None and _is_error(self.result)


def _is_error(text: str) -> bool:
    return text.lstrip().lower().startswith(_ERROR_PREFIX)


def tool_calls(messages: Sequence[Mapping[str, Any]]) -> list[ToolCallRecord]:
    """Every tool call in transcript order, each with its result text."""
    results: dict[str, str] = {}
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str):
                results.setdefault(call_id, content_text(message.get("content")))
    records = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
            call_id = str(call.get("id") or "")
            records.append(
                ToolCallRecord(
                    id=call_id,
                    name=str(function.get("name") or ""),
                    arguments=str(function.get("arguments") or ""),
                    result=results.get(call_id),
                )
            )
    return records


def tool_call_counts(messages: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many times each tool was called, by name."""
    return dict(Counter(record.name for record in tool_calls(messages)))


def tool_errors(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many tool results were errors (text starting with ``"error:"``)."""
    return sum(
        1
        for message in messages
        if isinstance(message, Mapping)
        and message.get("role") == "tool"
        and _is_error(content_text(message.get("content")))
    )


def tool_efficiency(messages: Sequence[Mapping[str, Any]], budget: int) -> float:
    """1.0 within ``budget`` calls, then ``budget / calls``: 8 calls on a budget of 4 score 0.5."""
    if budget < 0:
        raise ValueError(f"budget must be zero or more, got {budget!r}")
    calls = len(tool_calls(messages))
    if calls <= budget:
        return 1.0
    return budget / calls


def called_tool(
    messages: Sequence[Mapping[str, Any]], name: str, *, successfully: bool = False
) -> float:
    """1.0 when the model called ``name`` (with ``successfully``: and got a non-error result)."""
    for record in tool_calls(messages):
        if record.name == name and (
            not successfully or (record.result is not None and not record.error)
        ):
            return 1.0
    return 0.0


def tool_use_rewards(
    messages: Sequence[Mapping[str, Any]],
    *,
    budget: int | None = None,
    required: Iterable[str] = (),
    prefix: str = "tools",
) -> dict[str, float]:
    """A ready reward dict: efficiency (when ``budget`` is set), required tools, error count.

    Components: ``{prefix}_efficiency``, ``{prefix}_required`` (fraction of
    ``required`` tools called successfully) and ``{prefix}_errors`` (a count,
    so weight it negatively in training).
    """
    rewards: dict[str, float] = {}
    if budget is not None:
        rewards[f"{prefix}_efficiency"] = tool_efficiency(messages, budget)
    names = list(required)
    if names:
        hits = sum(called_tool(messages, name, successfully=True) for name in names)
        rewards[f"{prefix}_required"] = hits / len(names)
    rewards[f"{prefix}_errors"] = float(tool_errors(messages))
    return rewards
