"""The run-level figures, computed in one place for every reader.

The CLI summary renders :class:`RunStats`; the inspector's overview and
distributions and the static export serve :func:`overview` and
:func:`distributions`, built from the same functions, so a figure has one
definition however it is shown.

Definitions:

* a rollout's *reward* is the sum of its components after the batch zero-fill;
  a rollout with no component at all counts as 0 wherever a number is needed;
* it *passes* when that reward reaches the run's ``pass_threshold``;
* it is *scored* as :func:`benchmax.envs.is_scored` says (the ``scored`` column);
* a group gives *no learning signal* when it has two or more rollouts and they
  all have the same reward;
* quantiles are nearest-rank: the smallest value with at least ``q`` of the
  values at or below it;
* a histogram has one bar per value when there are at most ``bins`` distinct
  values, else ``bins`` equal-width bars from the minimum to the maximum.

The records and the parts every figure is built from live here; the summary
(:class:`RunStats`) in ``_run_stats``, the inspector's whole-run calls in
``_overview``, and the copy of those the writer keeps in the file in ``_kept``.

Every query reads an index or the per-group and per-example figures the writer
keeps, so the figures of a million-rollout run take well under a second.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from benchmax.envs import is_scorable
from benchmax.store._excerpt import prompt_excerpts
from benchmax.store._ids import short_ids
from benchmax.store._meta import RunMeta

DEFAULT_BINS = 20


@dataclass(frozen=True, slots=True)
class Bar:
    """One histogram bar: ``count`` values in ``[low, high]`` (``low == high``: that one value)."""

    low: float
    high: float
    count: int


@dataclass(frozen=True, slots=True)
class ComponentStats:
    count: int
    mean: float
    std: float
    min: float
    max: float
    filled: int


@dataclass(frozen=True, slots=True)
class ReasonCount:
    """How many rollouts ended for ``reason``, and how many of those are scored."""

    reason: str
    count: int
    scored: int

    @property
    def scorable(self) -> bool:
        return is_scorable(self.reason)

    @property
    def failed(self) -> int:
        return self.count - self.scored


@dataclass(frozen=True, slots=True)
class ExamplePass:
    """One example's passes, with its prompt excerpt (how a list shows which example it is)."""

    example_id: str
    passed: int
    total: int
    prompt: str = ""
    short_id: str = ""
    """The id as a person reads it (:func:`benchmax.store.short_ids`); the full id where empty."""

    @property
    def label(self) -> str:
        """What a table shows for this example: its short id."""
        return self.short_id or self.example_id

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean, nearest-rank quantiles and maximum of a per-rollout number."""

    mean: float
    p50: float
    p95: float
    max: float


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction around several queries, so figures of a run still being
    written all describe the same moment."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


_F = TypeVar("_F", bound=Callable[..., Any])


def _in_snapshot(function: _F) -> _F:
    @functools.wraps(function)
    def wrapper(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> Any:
        with snapshot(conn):
            return function(conn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def stored_threshold(conn: sqlite3.Connection) -> float:
    """The run's pass threshold (1.0 when the run never set one)."""
    value = _meta(conn, "pass_threshold")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1.0


def reason_counts(conn: sqlite3.Connection) -> list[ReasonCount]:
    """Rollouts per termination reason, most frequent first (from the reason index)."""
    rows = conn.execute(
        "SELECT termination_reason, COUNT(*), COALESCE(SUM(scored), 0) FROM rollouts GROUP BY termination_reason"
    ).fetchall()
    return [ReasonCount(reason, count, scored) for reason, count, scored in sorted(rows, key=lambda r: (-r[1], r[0]))]


def passed(conn: sqlite3.Connection, threshold: float) -> int:
    """Rollouts whose reward reaches ``threshold`` (a rollout with none counts as 0)."""
    count = _scalar(conn, "SELECT COUNT(*) FROM rollouts WHERE reward >= ?", (threshold,))
    if threshold <= 0:
        count += _scalar(conn, "SELECT COUNT(*) FROM rollouts WHERE reward IS NULL")
    return count


def components(conn: sqlite3.Connection, *, bins: int | None) -> dict[str, tuple[ComponentStats, list[Bar]]]:
    """Each reward component's figures (after the zero-fill) and, with ``bins``, its histogram."""
    result: dict[str, tuple[ComponentStats, list[Bar]]] = {}
    for name, count, mean, low, high, squares, filled in conn.execute(
        "SELECT component, COUNT(*), AVG(value), MIN(value), MAX(value), SUM(value * value), SUM(filled) "
        "FROM rewards GROUP BY component ORDER BY component"
    ).fetchall():
        variance = max(0.0, squares / count - mean * mean) if count else 0.0
        bars = (
            histogram(conn, "SELECT value AS v FROM rewards WHERE component = ?", (name,), low, high, bins)
            if bins
            else []
        )
        result[name] = (ComponentStats(count, mean, math.sqrt(variance), low, high, filled), bars)
    return result


def group_totals(conn: sqlite3.Connection) -> dict[str, Any]:
    """Sums over the per-group figures the writer keeps (no pass over the rollouts)."""
    row = _one(
        conn,
        "SELECT COUNT(*), COALESCE(SUM(size > 1 AND low = high), 0), COALESCE(SUM(size = 1), 0),"
        " COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(turns), 0),"
        " COALESCE(SUM(tool_calls), 0), COALESCE(SUM(seconds), 0.0), MIN(first_started_at), MAX(last_ended_at)"
        " FROM groups",
    )
    names = (
        "groups", "no_signal", "single", "prompt_tokens", "completion_tokens", "turns", "tool_calls", "seconds",
        "first_started_at", "last_ended_at",
    )  # fmt: skip
    return dict(zip(names, row or (0,) * len(names), strict=True))


def lowest_examples(
    conn: sqlite3.Connection, threshold: float, *, limit: int | None, stored: float | None = None
) -> tuple[ExamplePass, ...]:
    """The examples with the lowest pass rate, ties by id (``limit=None``: all of them)."""
    stored = stored_threshold(conn) if stored is None else stored
    limit_sql, params = ("LIMIT ?", [limit]) if limit is not None else ("", [])
    if threshold == stored:
        rows = conn.execute(
            "SELECT example_id, passed, rollouts FROM example_figures WHERE rollouts > 0"
            f" ORDER BY CAST(passed AS REAL) / rollouts, example_id {limit_sql}",
            params,
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT g.example_id, SUM(COALESCE(r.reward, 0) >= ?) AS p, COUNT(*) AS n FROM groups AS g"
            " JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq GROUP BY g.example_id"
            f" ORDER BY CAST(p AS REAL) / n, g.example_id {limit_sql}",
            [threshold, *params],
        ).fetchall()
    ids = [row[0] for row in rows]
    prompts = prompt_excerpts(conn, ids)
    short = short_ids([conn], ids)
    return tuple(
        ExamplePass(example_id, passes, total, prompts.get(example_id, ""), short[example_id])
        for example_id, passes, total in rows
    )


def spread(conn: sqlite3.Connection, column: str, column_sum: float, count: int) -> Spread:
    """Mean, p50, p95 and max of a rollout column that has an index (``seconds``, ``completion_tokens``)."""
    if not count:
        return Spread(0.0, 0.0, 0.0, 0.0)
    return Spread(
        mean=column_sum / count,
        p50=_rank(conn, column, 0.50, count),
        p95=_rank(conn, column, 0.95, count),
        max=float(_scalar(conn, f"SELECT MAX({column}) FROM rollouts")),
    )


def column_histogram(conn: sqlite3.Connection, column: str, figures: Spread, count: int, bins: int) -> list[Bar]:
    if not count:
        return []
    low = _scalar(conn, f"SELECT MIN({column}) FROM rollouts")
    return histogram(conn, f"SELECT {column} AS v FROM rollouts", (), low, figures.max, bins)


def histogram(
    conn: sqlite3.Connection, source: str, params: Sequence[Any], low: float | None, high: float | None, bins: int
) -> list[Bar]:
    """Bars of the values ``v`` that ``source`` selects, between ``low`` and ``high``."""
    if low is None or high is None:
        return []
    distinct = conn.execute(
        f"SELECT v, COUNT(*) FROM ({source}) GROUP BY v ORDER BY v LIMIT ?", (*params, bins + 1)
    ).fetchall()
    if len(distinct) <= bins:
        return [Bar(value, value, count) for value, count in distinct]
    width = (high - low) / bins
    counts = dict(
        conn.execute(
            f"SELECT MIN(CAST((v - ?) / ? AS INTEGER), ?), COUNT(*) FROM ({source}) GROUP BY 1",
            (low, width, bins - 1, *params),
        ).fetchall()
    )
    return [Bar(low + i * width, low + (i + 1) * width, counts.get(i, 0)) for i in range(bins)]


def wall_seconds(meta: RunMeta, totals: Mapping[str, Any]) -> float:
    """Seconds a process worked on the run: its active time once it ended, else its span so far."""
    started = meta.started_at or totals.get("first_started_at") or 0.0
    ended = meta.ended_at or totals.get("last_ended_at") or started
    wall = max(0.0, float(ended) - float(started))
    if meta.status not in (None, "running") and meta.active_seconds:
        wall = meta.active_seconds
    return wall


def _rank(conn: sqlite3.Connection, column: str, q: float, count: int) -> float:
    rank = max(1, math.ceil(q * count))
    return float(_scalar(conn, f"SELECT {column} FROM rollouts ORDER BY {column} LIMIT 1 OFFSET ?", (rank - 1,)))


def _meta(conn: sqlite3.Connection, key: str) -> Any:
    value = _scalar(conn, "SELECT value FROM meta WHERE key = ?", (key,), default=None)
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _one(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    # fetchall, not fetchone: a statement left unfinished keeps its read transaction
    # open, and a later read would not see the writer's new rows
    rows = conn.execute(sql, tuple(params)).fetchall()
    return rows[0] if rows else None


def _scalar(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = (), *, default: Any = 0) -> Any:
    row = _one(conn, sql, params)
    return row[0] if row and row[0] is not None else default
