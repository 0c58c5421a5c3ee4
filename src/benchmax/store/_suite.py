"""Per-env figures of a run (its *suite*): one row per env, each figure over that env's rollouts only.

A run of several envs (a mixture) names each example's env in ``examples.env``; a run of
one env leaves it ``NULL`` and its metadata names the env (:attr:`RunMeta.env_label`), so
a single run and a mixture's member read under the same name. A component two envs emit
may mean different things in each (``exact`` of a math env, of a code env): its mean is
only ever taken per env, never over the run.

Every figure is read from the per-env sums the store keeps (``env_totals``, ``env_components``:
a few rows per env, however long the run). A file written before those sums existed (and not
since opened by a writer, which adds them) is read from the per-example and per-group figures
joined to the examples table: a pass over the examples, never over the rollouts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax.store._figures import _in_snapshot
from benchmax.store._schema import example_env, has_env_totals, has_example_env


@dataclass(frozen=True, slots=True)
class EnvFigures:
    """One env of a run: its rollouts, failures, passes (at the run's threshold), groups and
    each component's mean over the env's rollouts that carry it (after the zero-fill)."""

    env: str | None
    rollouts: int
    failed: int
    passed: int
    groups: int
    groups_with_signal: int
    groups_no_signal: int
    components: Mapping[str, float]

    @property
    def scored(self) -> int:
        return self.rollouts - self.failed

    @property
    def pass_rate(self) -> float:
        return self.passed / self.rollouts if self.rollouts else 0.0


@dataclass(frozen=True, slots=True)
class EnvDelta:
    """One env in two runs, B against A (``None``: the run has no rollout of that env).

    Each side is the env's whole figures in its run: a mixture names its examples apart
    (``NAME/ID``), so an env's rows compare by its name, not by shared examples."""

    env: str | None
    a: EnvFigures | None
    b: EnvFigures | None

    @property
    def pass_delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b.pass_rate - self.a.pass_rate

    def component(self, name: str) -> tuple[float | None, float | None]:
        """The component's mean in A and in B (``None`` where that run's env did not emit it)."""
        return (
            self.a.components.get(name) if self.a is not None else None,
            self.b.components.get(name) if self.b is not None else None,
        )

    @property
    def component_names(self) -> tuple[str, ...]:
        names = {*(self.a.components if self.a else ()), *(self.b.components if self.b else ())}
        return tuple(sorted(names))


@_in_snapshot
def env_figures(conn: sqlite3.Connection, label: str | None) -> tuple[EnvFigures, ...]:
    """Each env of the run behind ``conn`` (``label``: the env of examples of no named env),
    in name order."""
    if has_env_totals(conn):
        return _kept_figures(conn, label)
    rows = {
        name: (rollouts, failed, passed)
        for name, rollouts, failed, passed in conn.execute(
            f"SELECT COALESCE({example_env('f')}, ?), SUM(f.rollouts), SUM(f.failed), SUM(f.passed)"
            " FROM example_figures AS f WHERE f.rollouts > 0 GROUP BY 1",
            (label,),
        ).fetchall()
    }
    groups = {
        name: (count, signal, none)
        for name, count, signal, none in conn.execute(
            f"SELECT COALESCE({example_env('g')}, ?), COUNT(*), COALESCE(SUM(g.size > 1 AND g.low < g.high), 0),"
            " COALESCE(SUM(g.size > 1 AND g.low = g.high), 0) FROM groups AS g GROUP BY 1",
            (label,),
        ).fetchall()
    }
    components: dict[str | None, dict[str, float]] = {}
    for name, component, total, count in conn.execute(
        f"SELECT COALESCE({example_env('c')}, ?), c.component, SUM(c.value_sum), SUM(c.count)"
        " FROM example_components AS c GROUP BY 1, 2",
        (label,),
    ).fetchall():
        if count:
            components.setdefault(name, {})[component] = total / count
    return tuple(
        EnvFigures(
            env=name,
            rollouts=rollouts,
            failed=failed,
            passed=passed,
            groups=groups.get(name, (0, 0, 0))[0],
            groups_with_signal=groups.get(name, (0, 0, 0))[1],
            groups_no_signal=groups.get(name, (0, 0, 0))[2],
            components=dict(sorted(components.get(name, {}).items())),
        )
        for name, (rollouts, failed, passed) in sorted(rows.items(), key=lambda item: (item[0] is None, item[0] or ""))
    )


def _kept_figures(conn: sqlite3.Connection, label: str | None) -> tuple[EnvFigures, ...]:
    """:func:`env_figures` from the per-env sums the store keeps (the key ``''``: ``label``)."""
    components: dict[str, dict[str, float]] = {}
    for name, component, total, count in conn.execute(
        "SELECT env, component, value_sum, count FROM env_components WHERE count > 0"
    ).fetchall():
        components.setdefault(name, {})[component] = total / count
    found = [
        EnvFigures(
            env=name or label,
            rollouts=rollouts,
            failed=failed,
            passed=passed,
            groups=groups,
            groups_with_signal=signal,
            groups_no_signal=none,
            components=dict(sorted(components.get(name, {}).items())),
        )
        for name, rollouts, failed, passed, groups, signal, none in conn.execute(
            "SELECT env, rollouts, failed, passed, groups, groups_with_signal, groups_no_signal FROM env_totals"
            " WHERE rollouts > 0"
        ).fetchall()
    ]
    return tuple(sorted(found, key=lambda figures: (figures.env is None, figures.env or "")))


def suite_row(figures: EnvFigures | None) -> dict[str, Any] | None:
    """An env's figures as the inspector's JSON (``None`` stays ``None``: a run without that env)."""
    if figures is None:
        return None
    return {
        "env": figures.env,
        "rollouts": figures.rollouts,
        "scored": figures.scored,
        "failed": figures.failed,
        "passed": figures.passed,
        "pass_rate": figures.pass_rate,
        "groups": figures.groups,
        "groups_with_signal": figures.groups_with_signal,
        "groups_no_signal": figures.groups_no_signal,
        "components": dict(figures.components),
    }


def names_envs(conn: sqlite3.Connection) -> bool:
    """Whether the run names the env of any example (a mixture): one lookup in a partial index."""
    if not has_example_env(conn):
        return False  # a file written before examples.env: one env
    return conn.execute("SELECT 1 FROM main.examples WHERE env IS NOT NULL LIMIT 1").fetchone() is not None


def env_deltas(a: tuple[EnvFigures, ...], b: tuple[EnvFigures, ...]) -> tuple[EnvDelta, ...]:
    """The envs of either run, matched by name, in name order."""
    left = {figures.env: figures for figures in a}
    right = {figures.env: figures for figures in b}
    names = sorted(left.keys() | right.keys(), key=lambda name: (name is None, name or ""))
    return tuple(EnvDelta(name, left.get(name), right.get(name)) for name in names)
