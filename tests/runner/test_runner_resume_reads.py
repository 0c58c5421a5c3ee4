"""A resumed run reads in proportion to what it has left: when its dataset's digest is the one it
started with, the stored example ids are trusted and only the examples left to run are read (each
checked against its stored id); a finished run reads none. A dataset whose digest changed is
checked example by example, as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from counted_env import ROWS_READ, KeptRowsEnv, RowsReadEnv
from runkit import SUPPORT, row, write_split

from benchmax.runner import RunConfig, arun
from benchmax.store import StoreError, open_run

EXAMPLES = 30


async def _run(tmp_path: Path, server, env: type, *, resume: bool = False):
    """An eval (or its resume) of a fresh instance of ``env``, whose class this module shares."""
    return await arun(_config(tmp_path, server, env.__name__), env=env(), resume=resume)


def _config(tmp_path: Path, server, env: str) -> RunConfig:
    return RunConfig(
        env=f"{SUPPORT / 'counted_env.py'}:{env}",
        data_dir=tmp_path / "data",
        base_url=server.base_url,
        model="scripted",
        group_size=2,
        run_dir=tmp_path / "run",
    )


def _rows() -> list[dict]:
    return [row(f"a{index}", f"question {index}") for index in range(EXAMPLES)]


def _drop_groups(run_dir: Path, positions: list[int]) -> None:
    """Take the groups of ``positions`` out of the run, as if it had stopped before writing them."""
    conn = sqlite3.connect(run_dir / "run.sqlite")
    try:
        for position in positions:
            first, last, group_id = conn.execute(
                "SELECT first_seq, last_seq, group_id FROM groups WHERE example_idx = ?", (position,)
            ).fetchone()
            for table in ("rollouts", "transcripts", "rewards", "rollout_costs"):
                conn.execute(f"DELETE FROM {table} WHERE seq BETWEEN ? AND ?", (first, last))
            conn.execute("DELETE FROM groups WHERE group_id = ?", (group_id,))
        conn.commit()
    finally:
        conn.close()


async def test_resuming_a_finished_run_reads_no_row_of_its_dataset_file(tmp_path, server):
    write_split(tmp_path / "data", _rows())
    ROWS_READ[0] = 0
    first = await _run(tmp_path, server, RowsReadEnv)
    assert first.new_rollouts == 2 * EXAMPLES and ROWS_READ[0] >= EXAMPLES

    ROWS_READ[0] = 0
    requests = server.counts["requests"]
    resumed = await _run(tmp_path, server, RowsReadEnv, resume=True)

    assert ROWS_READ[0] == 0
    assert resumed.new_rollouts == 0 and resumed.stats.rollouts == 2 * EXAMPLES
    assert server.counts["requests"] == requests


async def test_resuming_a_finished_run_names_none_of_its_in_memory_examples(tmp_path, server):
    write_split(tmp_path / "data", _rows())
    await _run(tmp_path, server, KeptRowsEnv)

    resumed = await _run(tmp_path, server, KeptRowsEnv, resume=True)

    assert resumed.new_rollouts == 0 and resumed.stats.rollouts == 2 * EXAMPLES
    packed = KeptRowsEnv.datasets[-1]._packed
    assert len(packed) == EXAMPLES and all(example_id is None for example_id in packed._ids)


async def test_a_resume_with_groups_left_names_and_runs_only_those(tmp_path, server):
    write_split(tmp_path / "data", _rows())
    await _run(tmp_path, server, KeptRowsEnv)
    with open_run(tmp_path / "run") as run:
        before = {record.rollout_id: record.reward for record in run.rollouts()}
    _drop_groups(tmp_path / "run", [4, 17])

    resumed = await _run(tmp_path, server, KeptRowsEnv, resume=True)

    assert resumed.new_rollouts == 4
    packed = KeptRowsEnv.datasets[-1]._packed
    assert [index for index, example_id in enumerate(packed._ids) if example_id is not None] == [4, 17]
    with open_run(tmp_path / "run") as run:
        assert {record.rollout_id: record.reward for record in run.rollouts()} == before


async def test_a_dataset_whose_digest_changed_is_checked_example_by_example(tmp_path, server):
    rows = _rows()
    write_split(tmp_path / "data", rows)
    await _run(tmp_path, server, KeptRowsEnv)
    rows[7] = row("changed", "another question")
    write_split(tmp_path / "data", rows)

    with pytest.raises(StoreError, match="first difference at index 7"):
        await _run(tmp_path, server, KeptRowsEnv, resume=True)
