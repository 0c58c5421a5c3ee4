"""The writer's queue is bounded: when the database cannot be written, producers wait instead of piling up."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from benchmax.envs import RolloutOutcome
from benchmax.store import GroupWrite, RunQueries, RunWriter


def _group(index: int) -> GroupWrite:
    outcomes = tuple(
        RolloutOutcome(rewards={"x": 1.0}, termination_reason="finished", rollout_id=f"g{index}#{s}", example_id="e")
        for s in range(2)
    )
    return GroupWrite(f"g{index}", "e", index, 0, outcomes, (0, 1))


async def test_a_locked_database_makes_the_next_group_wait_until_the_writer_catches_up(tmp_path: Path):
    writer = RunWriter.create(tmp_path / "run", {}, max_queued_rollouts=4)
    lock = sqlite3.connect(tmp_path / "run" / "run.sqlite", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another process holding the write lock: the writer thread is stuck
    await writer.awrite_group(_group(0))
    await writer.awrite_group(_group(1))
    assert writer.queued_rollouts == 4

    third = asyncio.create_task(writer.awrite_group(_group(2)))
    await asyncio.sleep(0.3)
    assert not third.done(), "the queue is full and nothing can be committed: the producer waits"
    assert writer.queued_rollouts == 4

    lock.execute("COMMIT")
    lock.close()
    await asyncio.wait_for(third, timeout=30)
    await writer.aflush()
    writer.close()
    with RunQueries(tmp_path / "run") as run:
        assert run.progress()["rollouts"] == 6


def test_a_writer_with_room_returns_at_once_and_commits_every_group(tmp_path: Path):
    writer = RunWriter.create(tmp_path / "run", {}, max_queued_rollouts=2)
    for index in range(20):
        writer.write_group(_group(index))
        assert writer.queued_rollouts <= 2
    writer.close()
    with RunQueries(tmp_path / "run") as run:
        assert run.progress()["rollouts"] == 40
