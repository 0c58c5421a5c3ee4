"""Reading tool use out of a transcript: calls per tool, budget, required tools, errors.

Calls are read from the assistant messages' ``tool_calls`` and paired with the
tool messages that answer them (by ``tool_call_id``). Which results were errors
(an unknown tool, bad arguments, a :class:`~benchmax.envs.ToolError`) the engine
records in each turn (``TurnRecord.tool_errors``); pass the rollout itself, so
these helpers read that record rather than guess from a result's text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmax.envs import BaseRollout, TurnRecord, content_text, tool_error_ids

Transcript = BaseRollout | Sequence[Mapping[str, Any]]
"""A rollout (its messages and turn records), or bare messages when errors do not matter."""


def _parts(
    transcript: Transcript, turns: Sequence[TurnRecord | Mapping[str, Any]] | None
) -> tuple[Sequence[Mapping[str, Any]], frozenset[str] | None]:
    if isinstance(transcript, BaseRollout):
        return transcript.messages, tool_error_ids(transcript.turns)
    return transcript, tool_error_ids(turns) if turns is not None else None


def _errors_known(errors: frozenset[str] | None, helper: str) -> frozenset[str]:
    if errors is None:
        raise TypeError(
            f"{helper} needs to know which tool results were errors: pass the rollout "
            "(or messages with turns=rollout.turns), not bare messages"
        )
    return errors


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One call the model made, what came back (``None``: no result), and whether it was an error."""

    id: str
    name: str
    arguments: str
    result: str | None
    error: bool = False


def tool_calls(
    transcript: Transcript, *, turns: Sequence[TurnRecord | Mapping[str, Any]] | None = None
) -> list[ToolCallRecord]:
    """Every tool call in transcript order, each with its result text and whether it was an error."""
    messages, errors = _parts(transcript, turns)
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
                    error=errors is not None and call_id in errors,
                )
            )
    return records


def tool_call_counts(transcript: Transcript) -> dict[str, int]:
    """How many times each tool was called, by name."""
    return dict(Counter(record.name for record in tool_calls(transcript)))


def tool_errors(transcript: Transcript, *, turns: Sequence[TurnRecord | Mapping[str, Any]] | None = None) -> int:
    """How many tool results told the model of an error (as the engine recorded them)."""
    _, errors = _parts(transcript, turns)
    return len(_errors_known(errors, "tool_errors"))


def tool_efficiency(transcript: Transcript, budget: int) -> float:
    """1.0 within ``budget`` calls, then ``budget / calls``: 8 calls on a budget of 4 score 0.5."""
    if budget < 0:
        raise ValueError(f"budget must be zero or more, got {budget!r}")
    calls = len(tool_calls(transcript))
    if calls <= budget:
        return 1.0
    return budget / calls


def called_tool(
    transcript: Transcript,
    name: str,
    *,
    successfully: bool = False,
    turns: Sequence[TurnRecord | Mapping[str, Any]] | None = None,
) -> float:
    """1.0 when the model called ``name`` (with ``successfully``: and got a non-error result)."""
    if successfully:
        _errors_known(_parts(transcript, turns)[1], "called_tool(..., successfully=True)")
    for record in tool_calls(transcript, turns=turns):
        if record.name == name and (not successfully or (record.result is not None and not record.error)):
            return 1.0
    return 0.0


def tool_use_rewards(
    transcript: Transcript,
    *,
    turns: Sequence[TurnRecord | Mapping[str, Any]] | None = None,
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
        rewards[f"{prefix}_efficiency"] = tool_efficiency(transcript, budget)
    names = list(required)
    if names:
        hits = sum(called_tool(transcript, name, successfully=True, turns=turns) for name in names)
        rewards[f"{prefix}_required"] = hits / len(names)
    rewards[f"{prefix}_errors"] = float(tool_errors(transcript, turns=turns))
    return rewards
