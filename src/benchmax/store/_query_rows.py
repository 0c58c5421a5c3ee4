"""How a rollout or a group reads as a row of the inspector's pages (bounded texts, decoded JSON)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson

from benchmax.store import _codec
from benchmax.store._schema import example_env

SNIPPET_CHARS = 240

_ROW_COLUMNS = (
    "r.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step, r.batch, "
    "r.termination_reason, r.error, r.scored, r.reward, r.prompt_tokens, r.completion_tokens, "
    "r.num_turns, r.num_tool_calls, r.started_at, r.seconds, r.final_text, " + example_env("r")
)
"""A rollout row's columns; the last, its example's env, is ``NULL`` in a run of one env (the
reader names it by the run's: ``QueryBase._label_envs``)."""


def _rollout_row(row: Sequence[Any], snippet: int) -> dict[str, Any]:
    (
        seq, rollout_id, group_id, example_id, sample_index, step, batch, reason, error, scored,
        reward, prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, seconds,
        final_text, env,
    ) = row  # fmt: skip
    return {
        "seq": seq,
        "rollout_id": rollout_id,
        "group_id": group_id,
        "example_id": example_id,
        "env": env,
        "sample_index": sample_index,
        "step": step,
        "batch": batch,
        "termination_reason": reason,
        "error": _cut(error, snippet) if error else None,
        "scored": bool(scored),
        "reward": reward,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "num_turns": num_turns,
        "num_tool_calls": num_tool_calls,
        "started_at": started_at,
        "seconds": seconds,
        "final_text": _cut(final_text or "", snippet),
        "final_chars": len(final_text or ""),
    }


def _group_row(row: Sequence[Any]) -> dict[str, Any]:
    group_id, example_id, example_idx, batch, step, size, reward_sum, reward_sq, low, high, failed = row
    mean = reward_sum / size if size else 0.0
    variance = max(0.0, reward_sq / size - mean * mean) if size else 0.0
    return {
        "group_id": group_id,
        "example_id": example_id,
        "example_idx": example_idx,
        "batch": batch,
        "step": step,
        "size": size,
        "mean": mean,
        "std": math.sqrt(variance),
        "low": low,
        "high": high,
        "failed": failed,
        "no_signal": size > 1 and low == high,
    }


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _loads(value: str | bytes | None) -> Any:
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _decode(value: bytes | str | None) -> Any:
    try:
        return _codec.decode(value)
    except orjson.JSONDecodeError:
        return value


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    variance = sum((value - mean) ** 2 for value in values) / len(values)
    return mean, math.sqrt(variance)
