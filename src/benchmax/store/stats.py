"""Run figures computed in SQL, so a 100k-rollout run summarises in well under a second."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ComponentStats:
    count: int
    mean: float
    std: float
    min: float
    max: float
    filled: int


@dataclass(frozen=True, slots=True)
class ExamplePass:
    example_id: str
    passed: int
    total: int

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class RunStats:
    """The summary figures of a run.

    A rollout *passes* when its total reward (sum of components after the
    zero-fill) reaches ``pass_threshold``. A group gives *no learning signal*
    when all its siblings have the same total reward. ``wall_seconds`` counts
    only the time a process worked on the run (resumed runs exclude the gap).
    """

    rollouts: int
    scored: int
    components: Mapping[str, ComponentStats]
    reasons: Mapping[str, int]
    errors: Mapping[str, int]
    pass_threshold: float
    passed: int
    examples: tuple[ExamplePass, ...]
    groups: int
    groups_no_signal: int
    groups_single: int
    latency_p50: float
    latency_p95: float
    prompt_tokens: int
    completion_tokens: int
    wall_seconds: float

    @property
    def pass_rate(self) -> float:
        return self.passed / self.rollouts if self.rollouts else 0.0

    @property
    def failures(self) -> int:
        return self.rollouts - self.scored


def compute_stats(
    conn: sqlite3.Connection, *, pass_threshold: float, meta: Mapping[str, Any] | None = None
) -> RunStats:
    meta = meta or {}
    total, scored, prompt, completion, first, last = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(scored), 0), COALESCE(SUM(prompt_tokens), 0), "
        "COALESCE(SUM(completion_tokens), 0), MIN(started_at), MAX(ended_at) FROM rollouts"
    ).fetchone()
    components = {}
    for name, count, mean, low, high, squares, filled in conn.execute(
        "SELECT component, COUNT(*), AVG(value), MIN(value), MAX(value), SUM(value * value), "
        "SUM(filled) FROM rewards GROUP BY component ORDER BY component"
    ):
        variance = max(0.0, squares / count - mean * mean) if count else 0.0
        components[name] = ComponentStats(count, mean, math.sqrt(variance), low, high, filled)
    reasons = dict(
        conn.execute(
            "SELECT termination_reason, COUNT(*) FROM rollouts GROUP BY termination_reason "
            "ORDER BY COUNT(*) DESC"
        ).fetchall()
    )
    errors = dict(
        conn.execute(
            "SELECT termination_reason, COUNT(*) FROM rollouts WHERE scored = 0 "
            "GROUP BY termination_reason ORDER BY COUNT(*) DESC"
        ).fetchall()
    )
    examples = tuple(
        ExamplePass(example_id, passed, count)
        for example_id, passed, count in conn.execute(
            "SELECT r.example_id, SUM(COALESCE(r.reward, 0) >= ?), COUNT(*) FROM rollouts AS r "
            "LEFT JOIN examples AS e ON e.example_id = r.example_id "
            "GROUP BY r.example_id ORDER BY MIN(e.idx), r.example_id",
            (pass_threshold,),
        )
    )
    groups, no_signal, single = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(low = high AND size > 1), 0), COALESCE(SUM(size = 1), 0) FROM ("
        " SELECT MIN(COALESCE(reward, 0)) AS low, MAX(COALESCE(reward, 0)) AS high, COUNT(*) AS size"
        " FROM rollouts GROUP BY group_id)"
    ).fetchone()
    seconds = [row[0] for row in conn.execute("SELECT seconds FROM rollouts ORDER BY seconds")]
    started = meta.get("started_at") or first or 0.0
    ended = meta.get("ended_at") or last or started
    wall = max(0.0, float(ended) - float(started))
    if meta.get("status") in ("completed", "interrupted", "failed") and meta.get("active_seconds"):
        wall = float(meta["active_seconds"])
    return RunStats(
        rollouts=total,
        scored=scored,
        components=components,
        reasons=reasons,
        errors=errors,
        pass_threshold=pass_threshold,
        passed=sum(example.passed for example in examples),
        examples=examples,
        groups=groups,
        groups_no_signal=no_signal,
        groups_single=single,
        latency_p50=_quantile(seconds, 0.50),
        latency_p95=_quantile(seconds, 0.95),
        prompt_tokens=prompt,
        completion_tokens=completion,
        wall_seconds=wall,
    )


def _quantile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank quantile: the smallest value with at least ``q`` of the data at or below it."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q * len(sorted_values)))
    return float(sorted_values[rank - 1])
