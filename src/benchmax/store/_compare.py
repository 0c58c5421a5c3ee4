"""Comparing two runs of the same examples: per component and per example deltas, B minus A.

One computation for ``benchmax diff`` (:func:`diff_runs`) and the inspector's
compare page (:func:`compare`). Examples are matched by id, which survives a
re-ordered dataset; examples present in one run only are counted, not compared,
and the overall means are taken over the shared examples, so a delta is never a
difference of datasets. An example's *pass rate* uses each run's own threshold.
Two runs that share no example are not comparable: both faces say so instead of
showing deltas (``RunDiff.comparable``, ``compare()["comparable"]``), and each
names the env of either run, so runs of different envs read as such.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson

from benchmax.store import _compat
from benchmax.store._meta import RunMeta
from benchmax.store._query_spec import MAX_PAGE, Page
from benchmax.store._run_stats import turn_reward_figures
from benchmax.store._suite import EnvDelta, env_deltas, env_figures

HEADLINE = "reward"
"""The pseudo-component for each rollout's total reward."""


class _Readable(Protocol):
    def _db(self) -> sqlite3.Connection: ...


@dataclass(frozen=True, slots=True)
class Delta:
    component: str
    example_id: str | None
    mean_a: float | None
    mean_b: float | None
    count_a: int
    count_b: int

    @property
    def delta(self) -> float | None:
        if self.mean_a is None or self.mean_b is None:
            return None
        return self.mean_b - self.mean_a


@dataclass(frozen=True, slots=True)
class ExampleFigures:
    """One example of one run: its rollouts, mean reward, passes and component means."""

    rollouts: int
    mean: float
    passed: int
    components: Mapping[str, tuple[float, int]]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.rollouts if self.rollouts else 0.0


@dataclass(frozen=True, slots=True)
class RunDiff:
    """B minus A. Examples present in one run only are listed, not compared.

    ``examples`` holds one delta per shared example and component (``reward``, the
    total, first); ``env_a``/``env_b`` name each run's env, when its metadata does.
    """

    components: tuple[Delta, ...]
    examples: tuple[Delta, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    shared: int = 0
    env_a: str | None = None
    env_b: str | None = None
    envs: tuple[EnvDelta, ...] = ()
    """Each env of either run, A beside B (see :class:`EnvDelta`): what a diff shows per env
    when a run holds several (:attr:`several_envs`)."""
    turn_rewards: tuple[Delta, ...] = ()
    """Per component of the envs' turn rewards (``env_response``), its mean per turn over each
    whole run (``count_*``: the turns that gave it); empty when neither run has any."""

    @property
    def several_envs(self) -> bool:
        """Whether either run holds more than one env (a mixture)."""
        return sum(delta.a is not None for delta in self.envs) > 1 or sum(d.b is not None for d in self.envs) > 1

    @property
    def comparable(self) -> bool:
        """Whether the runs share an example (without one, every delta is undefined)."""
        return self.shared > 0

    @property
    def same_env(self) -> bool:
        """Whether both runs name the same env (unknown names count as the same)."""
        return self.env_a is None or self.env_b is None or self.env_a == self.env_b


def run_env(meta: Mapping[str, Any] | RunMeta) -> str | None:
    """The env a run's metadata names: its class as loaded, else the spec it was run with."""
    return (meta if isinstance(meta, RunMeta) else RunMeta.from_json(meta)).env_name


def example_figures(conn: sqlite3.Connection) -> dict[str, ExampleFigures]:
    """Every example with rollouts, with the figures a comparison needs."""
    components: dict[str, dict[str, tuple[float, int]]] = {}
    for example_id, component, total, count in conn.execute(
        "SELECT example_id, component, value_sum, count FROM example_components"
    ).fetchall():
        components.setdefault(example_id, {})[component] = (total / count, count)
    return {
        example_id: ExampleFigures(rollouts, reward_sum / rollouts, passed, components.get(example_id, {}))
        for example_id, rollouts, reward_sum, passed in conn.execute(
            "SELECT example_id, rollouts, reward_sum, passed FROM example_figures WHERE rollouts > 0"
        ).fetchall()
    }


def diff_runs(a: _Readable, b: _Readable) -> RunDiff:
    """Per component (overall and per shared example) deltas of run ``b`` against run ``a``."""
    result = _diff(example_figures(a._db()), example_figures(b._db()))
    meta_a, meta_b = RunMeta.from_json(_meta(a._db())), RunMeta.from_json(_meta(b._db()))
    envs = env_deltas(env_figures(a._db(), meta_a.env_label), env_figures(b._db(), meta_b.env_label))
    turns_a, turns_b = turn_reward_figures(a._db()), turn_reward_figures(b._db())
    turn_rewards = tuple(
        Delta(
            name,
            None,
            turns_a[name].mean if name in turns_a else None,
            turns_b[name].mean if name in turns_b else None,
            turns_a[name].turns if name in turns_a else 0,
            turns_b[name].turns if name in turns_b else 0,
        )
        for name in sorted(turns_a.keys() | turns_b.keys())
    )
    return replace(result, env_a=meta_a.env_name, env_b=meta_b.env_name, envs=envs, turn_rewards=turn_rewards)


def _meta(conn: sqlite3.Connection) -> dict[str, Any]:
    found = {}
    for key, value in conn.execute("SELECT key, value FROM meta WHERE key IN ('env_class', 'config')").fetchall():
        try:
            found[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            found[key] = value
    return found


def _diff(per_a: Mapping[str, ExampleFigures], per_b: Mapping[str, ExampleFigures]) -> RunDiff:
    shared = sorted(per_a.keys() & per_b.keys())
    names = {name for figures in (*per_a.values(), *per_b.values()) for name in figures.components}
    per_example: list[Delta] = []
    overall: list[Delta] = []
    for component in [HEADLINE, *sorted(names - {HEADLINE})]:
        sums = [0.0, 0.0]
        counts = [0, 0]
        for example_id in shared:
            means = []
            for side, figures in enumerate((per_a[example_id], per_b[example_id])):
                mean, count = _component(figures, component)
                means.append((mean, count))
                if mean is not None:
                    sums[side] += mean * count
                    counts[side] += count
            (mean_a, count_a), (mean_b, count_b) = means
            per_example.append(Delta(component, example_id, mean_a, mean_b, count_a, count_b))
        overall.append(
            Delta(
                component,
                None,
                sums[0] / counts[0] if counts[0] else None,
                sums[1] / counts[1] if counts[1] else None,
                counts[0],
                counts[1],
            )
        )
    return RunDiff(
        components=tuple(overall),
        examples=tuple(per_example),
        only_in_a=tuple(sorted(per_a.keys() - per_b.keys())),
        only_in_b=tuple(sorted(per_b.keys() - per_a.keys())),
        shared=len(shared),
    )


def _component(figures: ExampleFigures, component: str) -> tuple[float | None, int]:
    if component == HEADLINE:
        return figures.mean, figures.rollouts
    mean, count = figures.components.get(component, (None, 0))
    return mean, count


_SORTS = {"delta", "pass_delta", "a", "b", "example_id"}


_PAIRS_SQL = """
CREATE TEMP TABLE pairs AS
SELECT example_id, a, b, a_pass, b_pass, a_rollouts, b_rollouts, b - a AS delta, b_pass - a_pass AS pass_delta, matched
FROM (
    SELECT ea.example_id AS example_id,
        ea.reward_sum / ea.rollouts AS a, eb.reward_sum / eb.rollouts AS b,
        CAST(ea.passed AS REAL) / ea.rollouts AS a_pass, CAST(eb.passed AS REAL) / eb.rollouts AS b_pass,
        ea.rollouts AS a_rollouts, COALESCE(eb.rollouts, 0) AS b_rollouts, eb.example_id IS NOT NULL AS matched
    FROM main.example_figures AS ea LEFT JOIN other.example_figures AS eb ON eb.example_id = ea.example_id
)
"""
"""Every example of A beside its figures in B, materialized once: the counts, the page and the
means all read it (a join over 250k text keys costs about half a second, so it runs once)."""
_ONLY_B_SQL = """
INSERT INTO temp.pairs
SELECT eb.example_id, NULL, eb.reward_sum / eb.rollouts, NULL, CAST(eb.passed AS REAL) / eb.rollouts, 0, eb.rollouts,
    NULL, NULL, 0
FROM other.example_figures AS eb
WHERE NOT EXISTS (SELECT 1 FROM main.example_figures AS ea WHERE ea.example_id = eb.example_id)
"""
"""The examples only B has (a run keeps figures only for examples with rollouts)."""
_PAGE_SQL = "SELECT example_id, a, b, a_pass, b_pass, a_rollouts, b_rollouts, delta, pass_delta FROM temp.pairs"
_SORT_SQL = {"delta": "ABS(delta)", "pass_delta": "pass_delta", "a": "a", "b": "b", "example_id": "example_id"}


def compare(
    a: Any,
    b: Any,
    *,
    sort: str = "delta",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
    changed_only: bool = False,
) -> dict[str, Any]:
    """The inspector's compare page: each run's headline, the component deltas, and a
    page of per-example deltas (``a`` and ``b`` are :class:`RunQueries`)."""
    offset, limit = max(0, int(offset)), max(1, min(MAX_PAGE, int(limit)))
    if a.layout < 2 or b.layout < 2:
        return _compare_in_memory(a, b, sort=sort, descending=descending, offset=offset, limit=limit,
                                  changed_only=changed_only)  # fmt: skip
    conn, _ = _compat.connect_reader(a.db)
    try:
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("ATTACH DATABASE ? AS other", (f"{b.db.resolve().as_uri()}?mode=ro",))
        with conn:
            conn.execute(_PAIRS_SQL)
            (b_examples,) = conn.execute("SELECT COUNT(*) FROM other.example_figures").fetchone()
            (matched,) = conn.execute("SELECT COALESCE(SUM(matched), 0) FROM temp.pairs").fetchone()
            if b_examples > matched:
                conn.execute(_ONLY_B_SQL)
        key = _SORT_SQL.get(sort, "ABS(delta)")
        direction = "DESC" if descending else "ASC"
        changed = "delta IS NULL OR ABS(delta) > 1e-12"
        where = f"WHERE {changed}" if changed_only else ""
        examples, total, only_a, only_b, common = conn.execute(
            f"SELECT COUNT(*), SUM({changed if changed_only else '1'}), SUM(b_rollouts = 0), SUM(a_rollouts = 0),"
            " SUM(a_rollouts > 0 AND b_rollouts > 0) FROM temp.pairs"
        ).fetchone()
        total = total or 0
        rows = conn.execute(
            f"{_PAGE_SQL} {where} ORDER BY {key} IS NULL, {key} {direction}, example_id {direction} LIMIT ? OFFSET ?",
            (limit, offset),
        ).fetchall()
        if examples == common:
            # both runs hold the same examples, all with rollouts: each side's means are its own
            means_a, means_b = _component_means(conn, "main"), _component_means(conn, "other")
            shared_pass = None
        else:
            shared_pass, means_a, means_b = _shared_figures(conn)
        ids = [row[0] for row in rows]
        marks = ",".join("?" * len(ids))
        per_page: dict[tuple[str, str], dict[str, float]] = {}
        for side in ("main", "other"):
            for example_id, component, total_value, count in conn.execute(
                f"SELECT example_id, component, value_sum, count FROM {side}.example_components"
                f" WHERE example_id IN ({marks})",
                ids,
            ).fetchall():
                per_page.setdefault((side, example_id), {})[component] = total_value / count
    finally:
        conn.close()
    names = sorted(means_a.keys() | means_b.keys())
    prompts = _page_prompts(a, b, ids)
    names_fields = ("example_id", "a", "b", "a_pass", "b_pass", "a_rollouts", "b_rollouts", "delta", "pass_delta")
    page_rows = []
    for row in rows:
        item = dict(zip(names_fields, row, strict=True))
        left, right = per_page.get(("main", item["example_id"]), {}), per_page.get(("other", item["example_id"]), {})
        item["components"] = {
            name: _sub(left.get(name), right.get(name)) if item["a_rollouts"] and item["b_rollouts"] else None
            for name in names
        }
        item["prompt"] = prompts.get(item["example_id"], "")
        page_rows.append(item)
    return _with_envs(a, b, {
        "components": [
            {
                "component": name,
                "a": means_a.get(name),
                "b": means_b.get(name),
                "delta": _sub(means_a.get(name), means_b.get(name)),
            }
            for name in names
        ],
        "headline": {"a": a.headline(), "b": b.headline()},
        "shared_pass": shared_pass,
        "only_a": only_a or 0,
        "only_b": only_b or 0,
        "common": common or 0,
        "examples": Page(page_rows, total, offset, limit).to_dict(),
    })


def _shared_figures(conn: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """Each run's pass rate and component means over the shared examples only: whole-run figures
    would differ by the examples one run has and the other lacks, even where no shared example changed."""
    passes = (
        "SELECT CAST(SUM(f.passed) AS REAL) / SUM(f.rollouts) FROM {side}.example_figures AS f"
        " JOIN {other}.example_figures AS g ON g.example_id = f.example_id AND g.rollouts > 0"
        " WHERE f.rollouts > 0"
    )
    shared_pass = {
        "a": conn.execute(passes.format(side="main", other="other")).fetchone()[0],
        "b": conn.execute(passes.format(side="other", other="main")).fetchone()[0],
    }
    shared = (
        "SELECT c.component, SUM(c.value_sum) / SUM(c.count) FROM {side}.example_components AS c"
        " JOIN {other}.example_figures AS f ON f.example_id = c.example_id AND f.rollouts > 0"
        " GROUP BY c.component"
    )
    means_a = dict(conn.execute(shared.format(side="main", other="other")).fetchall())
    means_b = dict(conn.execute(shared.format(side="other", other="main")).fetchall())
    return shared_pass, means_a, means_b


def _component_means(conn: sqlite3.Connection, side: str) -> dict[str, float]:
    """Each component's mean over a whole run, in one scan: a ``GROUP BY`` would sort every
    example's rows first (a third of a second at 250k examples)."""
    names = [row[0] for row in conn.execute(f"SELECT DISTINCT component FROM {side}.example_components")]
    if not names:
        return {}
    one = "SUM(value_sum) FILTER (WHERE component = ?), SUM(count) FILTER (WHERE component = ?)"
    sums = ", ".join(one for _ in names)
    row = conn.execute(f"SELECT {sums} FROM {side}.example_components", [name for name in names for _ in (0, 1)])
    values = row.fetchone()
    return {name: values[2 * i] / values[2 * i + 1] if values[2 * i + 1] else None for i, name in enumerate(names)}


def _page_prompts(a: Any, b: Any, example_ids: list[str]) -> dict[str, str]:
    """Each listed example's prompt excerpt, from the run that holds it (A first)."""
    found = a._prompts(example_ids)
    missing = [example_id for example_id in example_ids if example_id not in found]
    return {**found, **(b._prompts(missing) if missing else {})}


def _with_envs(a: Any, b: Any, result: dict[str, Any]) -> dict[str, Any]:
    """The compare page's answer, with whether it is one (a shared example) and each run's env."""
    env_a, env_b = a.run_meta().env_name, b.run_meta().env_name
    suite_a = {row["env"]: row for row in a.suite()}
    suite_b = {row["env"]: row for row in b.suite()}
    names = sorted(suite_a.keys() | suite_b.keys(), key=lambda name: (name is None, name or ""))
    return {
        **result,
        # each env's figures in either run, matched by env name (never a component across envs)
        "suite": [{"env": name, "a": suite_a.get(name), "b": suite_b.get(name)} for name in names],
        "comparable": result["common"] > 0,
        "env": {"a": env_a, "b": env_b, "same": env_a is None or env_b is None or env_a == env_b},
    }


def _compare_in_memory(
    a: Any, b: Any, *, sort: str, descending: bool, offset: int, limit: int, changed_only: bool
) -> dict[str, Any]:
    """:func:`compare` for version-1 files (their figures are views, not tables to join)."""
    per_a, per_b = example_figures(a._db()), example_figures(b._db())
    result = _diff(per_a, per_b)
    names = [delta.component for delta in result.components if delta.component != HEADLINE]
    rows = []
    for example_id in per_a.keys() | per_b.keys():
        left, right = per_a.get(example_id), per_b.get(example_id)
        row: dict[str, Any] = {
            "example_id": example_id,
            "a": left.mean if left else None,
            "b": right.mean if right else None,
            "a_pass": left.pass_rate if left else None,
            "b_pass": right.pass_rate if right else None,
            "a_rollouts": left.rollouts if left else 0,
            "b_rollouts": right.rollouts if right else 0,
            "components": {
                name: _sub(_component(left, name)[0] if left else None, _component(right, name)[0] if right else None)
                for name in names
            },
        }
        row["delta"] = _sub(row["a"], row["b"])
        row["pass_delta"] = _sub(row["a_pass"], row["b_pass"])
        rows.append(row)
    if changed_only:
        rows = [row for row in rows if row["delta"] is None or abs(row["delta"]) > 1e-12]
    key = sort if sort in _SORTS else "delta"

    def sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
        value = row[key]
        if key == "delta" and value is not None:
            value = abs(value)
        return (value is None, value if value is not None else 0, row["example_id"])

    rows.sort(key=sort_key, reverse=descending)
    if descending:
        rows.sort(key=lambda row: row[key] is None)
    page = rows[offset : offset + limit]
    common = per_a.keys() & per_b.keys()
    shared_pass = None
    if common != per_a.keys() | per_b.keys():  # as compare: the pass rates over the common examples

        def rate(per: dict[str, Any]) -> float | None:
            rollouts = sum(per[example_id].rollouts for example_id in common)
            passed = sum(round(per[example_id].pass_rate * per[example_id].rollouts) for example_id in common)
            return passed / rollouts if rollouts else None

        shared_pass = {"a": rate(per_a), "b": rate(per_b)}
    prompts = _page_prompts(a, b, [row["example_id"] for row in page])
    for row in page:
        row["prompt"] = prompts.get(row["example_id"], "")
    return _with_envs(a, b, {
        "components": [
            {"component": delta.component, "a": delta.mean_a, "b": delta.mean_b, "delta": delta.delta}
            for delta in result.components
            if delta.component != HEADLINE
        ],
        "headline": {"a": a.headline(), "b": b.headline()},
        "shared_pass": shared_pass,
        "only_a": len(result.only_in_a),
        "only_b": len(result.only_in_b),
        "common": len(per_a.keys() & per_b.keys()),
        "examples": Page(page, len(rows), offset, limit).to_dict(),
    })


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a
