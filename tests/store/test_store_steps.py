"""A training run's per-step metrics: written through the run session, read back in step order."""

from __future__ import annotations

import sqlite3

from benchmax.runner import RunSession
from benchmax.store import DB_NAME, Run


def test_step_metrics_are_kept_in_step_order_and_a_rewritten_step_replaces_its_row(tmp_path):
    session = RunSession.create(tmp_path / "run", kind="train", meta={})
    session.record_step(1, {"reward": 0.5, "groups/dead_share": 0.25})
    session.record_step(0, {"reward": 0.25, "mismatched_rollouts": [{"rollout_id": "step0/train/x#1"}]})
    session.record_step(1, {"reward": 0.75})
    session.close()
    with Run(tmp_path / "run") as run:
        steps = run.steps()
    assert [(step, metrics) for step, _, metrics in steps] == [
        (0, {"reward": 0.25, "mismatched_rollouts": [{"rollout_id": "step0/train/x#1"}]}),
        (1, {"reward": 0.75}),
    ]
    assert all(at > 0 for _, at, _ in steps)


def test_a_store_written_before_the_steps_table_existed_reads_as_no_steps(tmp_path):
    session = RunSession.create(tmp_path / "run", kind="eval", meta={})
    session.close()
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        conn.execute("DROP TABLE steps")
    with Run(tmp_path / "run") as run:
        assert run.steps() == []
