"""Runs written in the first store layout stay readable, and resuming one upgrades it in place."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest
from v1_store import downgrade

from benchmax import open_run
from benchmax.envs import RolloutOutcome
from benchmax.store import SCHEMA_VERSION, GroupWrite, RolloutFilter, RunQueries, RunWriter, compare, export_run

GROUPS = {
    "e1": [{"correct": 1.0, "fmt": 0.5}, {"correct": 0.0}],
    "e2": [{}, {"correct": 1.0}],
    "e3": [{"correct": 0.0}, {"correct": 0.0}],
}


@pytest.fixture
def runs(tmp_path: Path, make_run) -> tuple[Path, Path]:
    current = make_run(tmp_path / "current", GROUPS)
    return current, downgrade(current, tmp_path / "old")


def _figures(path: Path) -> tuple:
    with open_run(path) as run:
        stats = run.stats(examples=None)
        records = [record.to_dict() for record in run.rollouts()]
    with RunQueries(path) as queries:
        overview = queries.overview()
        dist = queries.distributions()
        pages = (
            queries.rollouts(RolloutFilter(failed=True)).rows,
            queries.groups(no_signal=True).rows,
            queries.examples(sort="pass_rate").rows,
            queries.group("eval/e1"),
        )
    return asdict(stats), records, overview, {k: v for k, v in dist.items() if k != "wall_seconds"}, pages


def test_a_version_1_file_reads_as_the_same_run(runs):
    current, old = runs
    with sqlite3.connect(old / "run.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)

    assert _figures(old) == _figures(current)


def test_a_version_1_file_exports_the_same_rows(runs, tmp_path):
    current, old = runs
    for path, name in ((current, "new.jsonl"), (old, "old.jsonl")):
        with open_run(path) as run:
            export_run(run, tmp_path / name)
    assert (tmp_path / "old.jsonl").read_bytes() == (tmp_path / "new.jsonl").read_bytes()


def test_resuming_a_version_1_run_upgrades_it_and_keeps_every_figure(runs):
    _, old = runs
    before = _figures(old)

    writer = RunWriter.resume(old)
    outcome = RolloutOutcome(
        rewards={"correct": 1.0}, termination_reason="finished", rollout_id="eval/e4#0", example_id="e4", split="eval",
        messages=[{"role": "user", "content": "e4"}, {"role": "assistant", "content": "upgraded"}],
    )  # fmt: skip
    with sqlite3.connect(old / "run.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert _figures(old) == before, "the upgrade changes no figure"
    writer.write_group(GroupWrite("eval/e4", "e4", 3, 0, (outcome,), (0,)))
    for batch in writer.unfilled_batches():
        writer.fill_batch(batch)
    writer.close()

    with RunQueries(old) as queries:
        assert queries.searchable
        found = queries.rollouts(RolloutFilter(text="upgraded")).rows
        assert [row["rollout_id"] for row in found] == ["eval/e4#0"]
        assert queries.overview()["rollouts"] == 7
        assert queries.rollout("eval/e4#0")["rewards"] == {
            "correct": {"value": 1.0, "filled": False}, "fmt": {"value": 0.0, "filled": True}
        }  # fmt: skip


def test_text_search_on_a_version_1_file_falls_back_to_substrings(runs):
    _, old = runs
    with RunQueries(old) as queries:
        assert not queries.searchable
        assert [row["rollout_id"] for row in queries.rollouts(RolloutFilter(text="#1")).rows] == [
            "eval/e1#1", "eval/e2#1", "eval/e3#1"
        ]  # fmt: skip


def test_comparing_version_1_files_gives_the_page_current_files_give(runs, tmp_path, make_run):
    current, old = runs
    other = make_run(tmp_path / "other", {"e1": [{"correct": 1.0}, {"correct": 1.0}], "e4": [{"correct": 0.5}]})
    other_old = downgrade(other, tmp_path / "other-old")
    pages = []
    for a, b in ((current, other), (old, other_old)):
        with RunQueries(a) as left, RunQueries(b) as right:
            pages.append(
                [
                    compare(left, right, sort=sort, descending=desc)
                    for sort in ("delta", "a", "example_id")
                    for desc in (True, False)
                ]
            )
    assert pages[0] == pages[1]
    assert pages[0][0]["examples"]["total"] == 4 and pages[0][0]["common"] == 1
