"""The summary figures of a run (:class:`RunStats`): what ``benchmax eval`` prints at the end,
``Run.stats()`` returns and the inspector's summary shows, from the parts in ``_figures``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmax.store._excerpt import one_line, prompt_excerpts
from benchmax.store._figures import (
    ComponentStats,
    ExamplePass,
    ReasonCount,
    Spread,
    _in_snapshot,
    _one,
    _scalar,
    components,
    group_totals,
    lowest_examples,
    passed,
    reason_counts,
    spread,
    stored_threshold,
    wall_seconds,
)
from benchmax.store._ids import short_ids
from benchmax.store._kept import data_stamp, kept
from benchmax.store._meta import RunMeta
from benchmax.store._suite import EnvFigures, env_figures, names_envs

SUMMARY_EXAMPLES = 15


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
    label: str = ""
    """The rollout id as a person reads it: its example's short id in place of the full one."""


SAMPLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class TurnRewardStats:
    """One component of the rewards envs gave turn by turn (``env_response``), over the run."""

    turns: int
    """Turns that gave this component."""
    rollouts: int
    """Rollouts with at least one such turn."""
    mean: float
    """Its mean per turn that gave it."""
    per_rollout: float
    """Its mean sum per rollout that has it."""


def turn_reward_figures(conn: sqlite3.Connection) -> dict[str, TurnRewardStats]:
    """:attr:`RunStats.turn_rewards`; none for a file written before turn rewards were kept."""
    if not _scalar(conn, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'turn_rewards'"):
        return {}
    rows = conn.execute(
        "SELECT component, SUM(value_sum), SUM(turns), COUNT(*) FROM turn_rewards GROUP BY component ORDER BY component"
    ).fetchall()
    return {
        name: TurnRewardStats(int(turns), int(rollouts), total / turns if turns else 0.0, total / rollouts)
        for name, total, turns, rollouts in rows
    }


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
    envs: tuple[EnvFigures, ...] = field(default=())
    """The figures per env of a run that names its envs (a mixture; see :meth:`Run.suite`);
    empty for a run of one env, whose figures are the run's."""
    turn_rewards: Mapping[str, TurnRewardStats] = field(default_factory=dict)
    """The rewards envs gave turn by turn, per component (empty: none did)."""

    @property
    def several_envs(self) -> bool:
        return len(self.envs) > 1

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
        envs=suite(conn, meta),
        turn_rewards=turn_reward_figures(conn),
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
        envs=suite(conn, meta),
        turn_rewards=turn_reward_figures(conn),
    )


def suite(conn: sqlite3.Connection, meta: RunMeta) -> tuple[EnvFigures, ...]:
    """:attr:`RunStats.envs`: the per-env figures of a run that names its envs, else none."""
    return env_figures(conn, meta.env_label) if names_envs(conn) else ()


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
    short = short_ids([conn], ids)
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
            label=rollout_id.replace(example_id, short[example_id]),
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
