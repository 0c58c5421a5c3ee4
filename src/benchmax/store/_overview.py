"""The inspector's whole-run calls: the run page's headline (:func:`overview`), a runs list's
line (:func:`headline`) and the spreads (:func:`distributions`), built from the parts in ``_figures``."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from typing import Any

from benchmax.store._figures import (
    DEFAULT_BINS,
    _in_snapshot,
    _one,
    _scalar,
    column_histogram,
    components,
    group_totals,
    histogram,
    passed,
    reason_counts,
    spread,
    stored_threshold,
    wall_seconds,
)
from benchmax.store._meta import RunMeta


@_in_snapshot
def overview(conn: sqlite3.Connection, *, bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """The run page's headline: counts, pass and failure rates, components with
    histograms, total-reward histogram, termination reasons."""
    threshold = stored_threshold(conn)
    counts = reason_counts(conn)
    total = sum(item.count for item in counts)
    scored = sum(item.scored for item in counts)
    passes = passed(conn, threshold)
    low, high = _one(conn, "SELECT MIN(reward), MAX(reward) FROM rollouts") or (None, None)
    return {
        "rollouts": total,
        "scored": scored,
        "failed": total - scored,
        "failure_rate": (total - scored) / total if total else 0.0,
        "passed": passes,
        "pass_rate": passes / total if total else 0.0,
        "pass_threshold": threshold,
        "examples": _scalar(conn, "SELECT COUNT(*) FROM example_figures WHERE rollouts > 0"),
        "groups": _scalar(conn, "SELECT COUNT(*) FROM groups"),
        "components": {
            name: {**asdict(figures), "histogram": [asdict(bar) for bar in bars]}
            for name, (figures, bars) in components(conn, bins=bins).items()
        },
        "reward_histogram": [
            asdict(bar)
            for bar in histogram(conn, "SELECT reward AS v FROM rollouts WHERE reward IS NOT NULL", (), low, high, bins)
        ],
        "reasons": [
            {"reason": item.reason, "count": item.count, "scored": item.scored, "scorable": item.scorable}
            for item in counts
        ],
    }


@_in_snapshot
def headline(conn: sqlite3.Connection) -> dict[str, Any]:
    """What a list of runs shows for one: counts, pass and failure rates, component means."""
    threshold = stored_threshold(conn)
    counts = reason_counts(conn)
    total = sum(item.count for item in counts)
    scored = sum(item.scored for item in counts)
    return {
        "rollouts": total,
        "scored": scored,
        "failed": total - scored,
        "failure_rate": (total - scored) / total if total else 0.0,
        "pass_rate": passed(conn, threshold) / total if total else 0.0,
        "pass_threshold": threshold,
        "components": dict(conn.execute("SELECT component, AVG(value) FROM rewards GROUP BY component").fetchall()),
    }


@_in_snapshot
def distributions(conn: sqlite3.Connection, meta: RunMeta, *, bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """The figures of whole-run spread: latency, tokens, turns, zero-fills, no-signal groups."""
    totals = group_totals(conn)
    total = _scalar(conn, "SELECT COUNT(*) FROM rollouts")
    latency = spread(conn, "seconds", totals["seconds"], total)
    completion = spread(conn, "completion_tokens", totals["completion_tokens"], total)
    return {
        "latency": {
            **asdict(latency),
            "histogram": [asdict(bar) for bar in column_histogram(conn, "seconds", latency, total, bins)],
        },
        "tokens": {
            "prompt": totals["prompt_tokens"],
            "completion": totals["completion_tokens"],
            "completion_p50": completion.p50,
            "completion_p95": completion.p95,
            "completion_max": completion.max,
            "histogram": [asdict(bar) for bar in column_histogram(conn, "completion_tokens", completion, total, bins)],
        },
        "turns": totals["turns"],
        "tool_calls": totals["tool_calls"],
        "first_started_at": totals["first_started_at"],
        "last_ended_at": totals["last_ended_at"],
        "wall_seconds": wall_seconds(meta, totals),
        "filled": dict(
            conn.execute(
                "SELECT component, SUM(filled) FROM rewards GROUP BY component HAVING SUM(filled) > 0"
            ).fetchall()
        ),
        "groups_with_rollouts": totals["groups"],
        "groups_no_signal": totals["no_signal"],
        "groups_single": totals["single"],
    }
