"""``Run.examples()`` gives each stored example its env from ``examples.env`` (what rescore reads),
``None`` in a run of one env and in a file written before the column existed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from benchmax import open_run
from benchmax.envs import Example
from benchmax.store import RunWriter


def _write(path: Path, examples: list[Example]) -> Path:
    writer = RunWriter.create(path, {"pass_threshold": 1.0})
    writer.add_examples("eval", examples)
    writer.close()
    return path


def test_the_stored_examples_carry_the_env_the_store_names(tmp_path):
    # ids that say nothing of their env: the env is the column's, never a reading of the id
    run_dir = _write(
        tmp_path / "mix",
        [Example("q1", {"x": 1}, env="code"), Example("math/q2", {"x": 2}, env="format"), Example("q3", {"x": 3})],
    )

    with open_run(run_dir) as run:
        examples = run.examples()

    assert [(example.id, example.payload, example.env) for example in examples] == [
        ("q1", {"x": 1}, "code"),
        ("math/q2", {"x": 2}, "format"),
        ("q3", {"x": 3}, None),
    ]


def test_a_file_without_the_env_column_reads_back_with_no_env(tmp_path):
    run_dir = _write(tmp_path / "old", [Example("q1", {"x": 1})])
    conn = sqlite3.connect(run_dir / "run.sqlite")
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")  # the per-env sums came later still
    conn.execute("DROP TABLE env_totals")
    conn.execute("DROP TABLE env_components")
    conn.execute("DROP INDEX examples_by_env")
    conn.execute("ALTER TABLE examples DROP COLUMN env")
    conn.commit()
    conn.close()

    with open_run(run_dir) as run:
        assert [(example.id, example.env) for example in run.examples()] == [("q1", None)]
