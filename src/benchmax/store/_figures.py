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

Every query reads an index or the per-group and per-example figures the writer
keeps, so the figures of a million-rollout run take well under a second.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import orjson

from benchmax.envs import is_scorable
from benchmax.store._excerpt import one_line, prompt_excerpts
from benchmax.store._ids import short_ids
from benchmax.store._meta import RunMeta

DEFAULT_BINS = 20
SUMMARY_EXAMPLES = 15


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
class Sample:
    """One rollout shown whole in a summary: the task (prompt and the example's fields) next to the answer.

    Every text is one bounded line: ``prompt`` shows image parts as placeholders,
    ``fields`` is the payload beyond ``prompt_messages`` as ``key=value`` pairs.
    """

    rollout_id: str
    example_id: str
    outcome: str
    termination_reason: str
    reward: float | None
    prompt: str
    fields: str
    answer: str
    error: str | None


SAMPLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean, nearest-rank quantiles and maximum of a per-rollout number."""

    mean: float
    p50: float
    p95: float
    max: float


@dataclass(frozen=True, slots=True)
class RunStats:
    """The summary figures of a run.

    ``examples`` holds the examples with the lowest pass rate (ties by id), at
    most as many as asked for; ``example_count`` is how many examples have
    rollouts. ``wall_seconds`` counts only the time a process worked on the run
    (resumed runs exclude the gap).
    """

    rollouts: int
    scored: int
    components: Mapping[str, ComponentStats]
    reasons: Mapping[str, int]
    errors: Mapping[str, int]
    pass_threshold: float
    passed: int
    examples: tuple[ExamplePass, ...]
    example_count: int
    groups: int
    groups_no_signal: int
    groups_single: int
    latency: Spread
    completion: Spread
    prompt_tokens: int
    completion_tokens: int
    turns: int
    tool_calls: int
    wall_seconds: float
    reason_counts: tuple[ReasonCount, ...] = field(default=())
    first_errors: Mapping[str, str] = field(default_factory=dict)
    """The first stored error text of each failure reason: what went wrong, in the summary."""
    samples: tuple[Sample, ...] = field(default=())
    """A few rollouts to read whole: the first that passed, the first scored one that did not,
    the first operational failure (each when there is one)."""

    @property
    def every_example_passes(self) -> bool:
        """Every example with rollouts passed every time (so a lowest-pass-rate list says nothing)."""
        lowest = self.examples[0] if self.examples else None  # the list is lowest first
        return lowest is not None and lowest.passed == lowest.total

    @property
    def pass_rate(self) -> float:
        return self.passed / self.rollouts if self.rollouts else 0.0

    @property
    def failures(self) -> int:
        return self.rollouts - self.scored

    @property
    def latency_p50(self) -> float:
        return self.latency.p50

    @property
    def latency_p95(self) -> float:
        return self.latency.p95


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


@_in_snapshot
def run_stats(
    conn: sqlite3.Connection,
    *,
    meta: RunMeta,
    pass_threshold: float | None = None,
    examples: int | None = SUMMARY_EXAMPLES,
) -> RunStats:
    """Every summary figure of the run behind ``conn`` (``examples``: how many of the
    lowest-passing examples to list; ``None`` lists all)."""
    stored = stored_threshold(conn)
    threshold = stored if pass_threshold is None else float(pass_threshold)
    fast = _from_kept(conn, meta, threshold, stored, examples)
    if fast is not None:
        return fast
    counts = reason_counts(conn)
    totals = group_totals(conn)
    total = sum(item.count for item in counts)
    return RunStats(
        rollouts=total,
        scored=sum(item.scored for item in counts),
        components={name: figures for name, (figures, _) in components(conn, bins=None).items()},
        reasons={item.reason: item.count for item in counts},
        errors={item.reason: item.failed for item in counts if item.failed},
        pass_threshold=threshold,
        passed=passed(conn, threshold),
        examples=lowest_examples(conn, threshold, limit=examples, stored=stored),
        example_count=_scalar(conn, "SELECT COUNT(*) FROM example_figures WHERE rollouts > 0"),
        groups=totals["groups"],
        groups_no_signal=totals["no_signal"],
        groups_single=totals["single"],
        latency=spread(conn, "seconds", totals["seconds"], total),
        completion=spread(conn, "completion_tokens", totals["completion_tokens"], total),
        prompt_tokens=totals["prompt_tokens"],
        completion_tokens=totals["completion_tokens"],
        turns=totals["turns"],
        tool_calls=totals["tool_calls"],
        wall_seconds=wall_seconds(meta, totals),
        reason_counts=tuple(counts),
        first_errors=first_errors(conn, counts),
        samples=samples(conn, threshold),
    )


def _from_kept(
    conn: sqlite3.Connection, meta: RunMeta, threshold: float, stored: float, examples: int | None
) -> RunStats | None:
    """:class:`RunStats` from the figures the writer kept, when they still describe the run."""
    try:
        stamp = data_stamp(conn)
        top, spread_ = kept(conn, "overview", stamp), kept(conn, "distributions", stamp)
    except sqlite3.OperationalError:  # a version-1 file keeps none
        return None
    if top is None or spread_ is None or "completion_max" not in spread_["tokens"]:
        return None
    counts = [ReasonCount(item["reason"], item["count"], item["scored"]) for item in top["reasons"]]
    total = top["rollouts"]
    tokens = spread_["tokens"]
    latency = spread_["latency"]
    return RunStats(
        rollouts=total,
        scored=top["scored"],
        components={
            name: ComponentStats(c["count"], c["mean"], c["std"], c["min"], c["max"], c["filled"])
            for name, c in top["components"].items()
        },
        reasons={item.reason: item.count for item in counts},
        errors={item.reason: item.failed for item in counts if item.failed},
        pass_threshold=threshold,
        passed=top["passed"] if threshold == top["pass_threshold"] else passed(conn, threshold),
        examples=lowest_examples(conn, threshold, limit=examples, stored=stored),
        example_count=top["examples"],
        groups=spread_["groups_with_rollouts"],
        groups_no_signal=spread_["groups_no_signal"],
        groups_single=spread_["groups_single"],
        latency=Spread(latency["mean"], latency["p50"], latency["p95"], latency["max"]),
        completion=Spread(
            tokens["completion"] / total if total else 0.0,
            tokens["completion_p50"],
            tokens["completion_p95"],
            tokens["completion_max"],
        ),
        prompt_tokens=tokens["prompt"],
        completion_tokens=tokens["completion"],
        turns=spread_["turns"],
        tool_calls=spread_["tool_calls"],
        wall_seconds=wall_seconds(meta, spread_),
        reason_counts=tuple(counts),
        first_errors=first_errors(conn, counts),
        samples=samples(conn, threshold),
    )


_SAMPLE_SCAN = 256
"""Rollouts (in stored order) looked through for a passing and a non-passing sample: a bounded read."""


def samples(conn: sqlite3.Connection, threshold: float) -> tuple[Sample, ...]:
    """The summary's sample rollouts (see :attr:`RunStats.samples`), each read by the primary key or an index."""
    columns = "seq, rollout_id, example_id, termination_reason, scored, reward, final_text, error"
    rows = conn.execute(f"SELECT {columns} FROM rollouts ORDER BY seq LIMIT ?", (_SAMPLE_SCAN,)).fetchall()
    rows += conn.execute(f"SELECT {columns} FROM rollouts WHERE scored = 0 ORDER BY seq LIMIT 1").fetchall()
    picked: dict[str, tuple[Any, ...]] = {}
    for row in rows:
        reward = 0.0 if row[5] is None else row[5]
        outcome = "failed" if not row[4] else "passed" if reward >= threshold else "not passed"
        picked.setdefault(outcome, row)
    chosen = [(outcome, picked[outcome]) for outcome in ("passed", "not passed", "failed") if outcome in picked]
    ids = [row[2] for _, row in chosen]
    payloads = _payloads(conn, ids)
    prompts = prompt_excerpts(conn, ids, SAMPLE_CHARS)
    return tuple(
        Sample(
            rollout_id=rollout_id,
            example_id=example_id,
            outcome=outcome,
            termination_reason=reason,
            reward=reward,
            prompt=prompts.get(example_id, ""),
            fields=_fields_line(payloads.get(example_id)),
            answer=one_line(final_text or "", SAMPLE_CHARS),
            error=one_line(error, SAMPLE_CHARS) if error else None,
        )
        for outcome, (_, rollout_id, example_id, reason, _scored, reward, final_text, error) in chosen
    )


def _payloads(conn: sqlite3.Connection, example_ids: Sequence[str]) -> dict[str, Any]:
    if not example_ids:
        return {}
    marks = ",".join("?" * len(example_ids))
    found = {}
    for example_id, payload in conn.execute(
        f"SELECT example_id, payload FROM examples WHERE example_id IN ({marks})", list(example_ids)
    ).fetchall():
        try:
            found[example_id] = orjson.loads(payload)
        except orjson.JSONDecodeError:
            found[example_id] = None
    return found


def _fields_line(payload: Any) -> str:
    """An example's fields beyond its prompt as ``key=value`` pairs on one bounded line."""
    if not isinstance(payload, Mapping):
        return ""
    pairs = []
    for key, value in payload.items():
        if key == "prompt_messages":
            continue
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        pairs.append(f"{key}={text}")
    return one_line(", ".join(pairs), SAMPLE_CHARS)


def first_errors(conn: sqlite3.Connection, counts: Iterable[ReasonCount]) -> dict[str, str]:
    """The earliest error text of each reason that has failures (one indexed lookup per reason)."""
    found: dict[str, str] = {}
    for item in counts:
        if not item.failed:
            continue
        row = _one(
            conn,
            "SELECT error FROM rollouts WHERE termination_reason = ? AND scored = 0 AND error IS NOT NULL"
            " ORDER BY seq LIMIT 1",
            (item.reason,),
        )
        if row is not None:
            found[item.reason] = row[0]
    return found


# -- figures kept in the file ---------------------------------------------------------------

CACHED = ("overview", "distributions")
"""The figures a writer keeps in the file when it closes (the inspector's two big calls)."""


def data_stamp(conn: sqlite3.Connection) -> str:
    """Changes whenever rollouts are added, replaced or zero-filled (metadata aside); cheap."""
    last = _scalar(conn, "SELECT MAX(seq) FROM rollouts", default=-1)
    batches = conn.execute("SELECT batch, rollouts, filled_rollouts FROM batches ORDER BY batch").fetchall()
    return orjson.dumps([_KEPT_VERSION, last, batches]).decode()


_KEPT_VERSION = 2
"""Bumped whenever the kept figures change shape: older kept figures are then recomputed."""


def kept(conn: sqlite3.Connection, name: str, stamp: str) -> Any | None:
    """The figures ``name`` as the writer kept them, if they still describe the run."""
    row = _one(conn, "SELECT stamp, value FROM figures WHERE name = ?", (name,))
    return orjson.loads(row[1]) if row is not None and row[0] == stamp else None


def keep(conn: sqlite3.Connection) -> None:
    """Compute the inspector's whole-run figures and keep them in the file (writer side)."""
    stamp = data_stamp(conn)
    if all(kept(conn, name, stamp) is not None for name in CACHED):
        return
    values = {"overview": overview(conn), "distributions": distributions(conn, RunMeta())}
    conn.executemany(
        "INSERT INTO figures (name, stamp, value) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET stamp = excluded.stamp, value = excluded.value",
        [(name, stamp, orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()) for name, value in values.items()],
    )


# -- the inspector's two calls -------------------------------------------------------------


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


# -- the parts -----------------------------------------------------------------------------


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
