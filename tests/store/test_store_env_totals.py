"""A run's per-env figures are kept as it is written (a few rows per env), equal to a recount from its
per-example and per-group figures after every kind of write (groups written, filled, written again,
rescored); a file written before they were kept gets them when a writer opens it, and its readers
meanwhile read the same figures the long way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_store_envs import suite_run  # noqa: F401  (the fixture: a real eval of a mixture of two envs)

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome
from benchmax.store import GroupWrite, RunWriter


def _recount(db: Path) -> dict[str, tuple]:
    """Each env's figures summed from the per-example and per-group figures (what a reader did per call)."""
    conn = sqlite3.connect(db)
    try:
        env = "COALESCE(e.env, '')"
        totals = {
            name: [rollouts, failed, passed, 0, 0, 0]
            for name, rollouts, failed, passed in conn.execute(
                f"SELECT {env}, SUM(f.rollouts), SUM(f.failed), SUM(f.passed) FROM example_figures AS f"
                " LEFT JOIN examples AS e ON e.example_id = f.example_id GROUP BY 1"
            )
        }
        for name, groups, signal, none in conn.execute(
            f"SELECT {env}, COUNT(*), COALESCE(SUM(g.size > 1 AND g.low < g.high), 0),"
            " COALESCE(SUM(g.size > 1 AND g.low = g.high), 0) FROM groups AS g"
            " LEFT JOIN examples AS e ON e.example_id = g.example_id GROUP BY 1"
        ):
            totals.setdefault(name, [0, 0, 0, 0, 0, 0])[3:] = [groups, signal, none]
        components = {
            (name, component): (pytest.approx(total), count)
            for name, component, total, count in conn.execute(
                f"SELECT {env}, c.component, SUM(c.value_sum), SUM(c.count) FROM example_components AS c"
                " LEFT JOIN examples AS e ON e.example_id = c.example_id GROUP BY 1, 2"
            )
        }
    finally:
        conn.close()
    return {"totals": {name: tuple(values) for name, values in totals.items() if any(values)}, "components": components}


def _kept(db: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(db)
    try:
        totals = {
            name: tuple(values)
            for name, *values in conn.execute(
                "SELECT env, rollouts, failed, passed, groups, groups_with_signal, groups_no_signal FROM env_totals"
            )
            if any(values)
        }
        components = {
            (name, component): (total, count)
            for name, component, total, count in conn.execute(
                "SELECT env, component, value_sum, count FROM env_components WHERE count != 0"
            )
        }
    finally:
        conn.close()
    return {"totals": totals, "components": components}


def _outcomes(example: str, rewards: list[dict[str, float]]) -> tuple[RolloutOutcome, ...]:
    return tuple(
        RolloutOutcome(
            rewards=values,
            termination_reason="finished" if values else "model_error",
            error=None if values else "HTTP 503",
            rollout_id=f"eval/{example}#{sample}",
            example_id=example,
            split="eval",
            messages=[{"role": "user", "content": example}],
        )
        for sample, values in enumerate(rewards)
    )


def _mixture_writer(run_dir: Path) -> RunWriter:
    writer = RunWriter.create(run_dir, {"started_at": 0.0, "ended_at": 1.0, "pass_threshold": 1.0})
    writer.add_examples(
        "eval",
        [
            Example(f"{env}/{index}", {"prompt_messages": [{"role": "user", "content": f"{env} {index}"}]}, env)
            for env in ("math", "code")
            for index in range(3)
        ],
    )
    return writer


def _write(writer: RunWriter, position: int, example: str, rewards: list[dict[str, float]], batch: int = 0) -> None:
    outcomes = _outcomes(example, rewards)
    writer.write_group(GroupWrite(f"eval/{example}", example, position, batch, outcomes, tuple(range(len(outcomes)))))


def test_a_mixture_evals_kept_per_env_figures_equal_the_recount(suite_run):  # noqa: F811
    db = suite_run / "run.sqlite"
    kept = _kept(db)
    assert set(kept["totals"]) == {"math", "code"}
    assert kept == _recount(db)


def test_the_kept_figures_follow_writes_fills_and_groups_written_again(tmp_path):
    writer = _mixture_writer(tmp_path / "run")
    _write(writer, 0, "math/0", [{"exact": 1.0, "format": 1.0}, {"exact": 0.0}])
    _write(writer, 1, "math/1", [{"exact": 1.0}, {"exact": 1.0}])
    _write(writer, 3, "code/0", [{"tests": 1.0}, {}])
    writer.fill_batch(0)
    _write(writer, 4, "code/1", [{"tests": 0.5}, {"tests": 0.25}], batch=1)
    writer.flush()
    db = tmp_path / "run" / "run.sqlite"
    assert _kept(db) == _recount(db)
    assert _kept(db)["totals"]["math"] == (4, 0, 3, 2, 1, 1)

    _write(writer, 0, "math/0", [{"exact": 1.0}, {"exact": 1.0}, {}])  # written again: replaces the group
    writer.fill_batch(0)
    writer.close()

    assert _kept(db) == _recount(db)
    assert _kept(db)["totals"]["math"] == (5, 1, 4, 2, 1, 1)
    with open_run(tmp_path / "run") as run:
        by_env = {figures.env: figures for figures in run.suite()}
    assert by_env["math"].rollouts == 5 and by_env["math"].passed == 4
    assert by_env["code"].components == {"tests": pytest.approx((1.0 + 0.0 + 0.5 + 0.25) / 4)}


def _strip_kept_figures(db: Path) -> None:
    """The file as a benchmax from before the per-env sums wrote it."""
    conn = sqlite3.connect(db)
    try:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE env_totals")
        conn.execute("DROP TABLE env_components")
        conn.commit()
    finally:
        conn.close()


def test_a_file_without_kept_figures_reads_the_same_and_gets_them_from_its_next_writer(tmp_path):
    writer = _mixture_writer(tmp_path / "run")
    _write(writer, 0, "math/0", [{"exact": 1.0}, {"exact": 0.0}])
    _write(writer, 3, "code/0", [{"tests": 1.0}, {"tests": 1.0}])
    writer.fill_batch(0)
    writer.close()
    db = tmp_path / "run" / "run.sqlite"
    with open_run(tmp_path / "run") as run:
        kept = run.suite()
    _strip_kept_figures(db)

    with open_run(tmp_path / "run") as run:
        assert run.suite() == kept  # read from the per-example figures

    resumed = RunWriter.resume(tmp_path / "run")
    _write(resumed, 4, "code/1", [{"tests": 0.0}, {"tests": 1.0}], batch=1)
    resumed.close()
    assert _kept(db) == _recount(db)
    assert _kept(db)["totals"]["code"] == (4, 0, 3, 2, 1, 1)
