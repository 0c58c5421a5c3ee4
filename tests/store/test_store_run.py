"""The run store: one writer, whole groups per transaction, typed read-only records and exports."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome, SamplingParams
from benchmax.runner import RunConfig, arun
from benchmax.store import GroupWrite, RolloutRecord, RunWriter, StoreError, export_run, read_jsonl_export


@pytest.fixture
async def live_run(tmp_path: Path, server) -> Path:
    """A real run: two groups of two, one example failing, seeded sampling, env logs."""
    write_split(tmp_path / "data", [row("4", "right", bonus=0.25), row("5", "fails", script=[{"status": 400}])])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", group_size=2,
        run_dir=tmp_path / "run", sampling=SamplingParams(seed=3),
    )  # fmt: skip
    await arun(config)
    return tmp_path / "run"


def test_open_run_returns_typed_records_with_transcripts_rewards_and_logs(live_run):
    with open_run(live_run) as run:
        records = list(run.rollouts())
        groups = run.groups()
        examples = run.examples()
        right = run.rollout(records[0].rollout_id)
        logs = run.logs(rollout_id=right.rollout_id)
        meta = run.meta

    assert all(isinstance(record, RolloutRecord) for record in records)
    assert len(records) == 4 and len(run_ids := {r.rollout_id for r in records}) == 4
    assert {r.group_id for r in records} == {g.group_id for g in groups} == {f"eval/{e.id}" for e in examples}
    assert [g.size for g in groups] == [2, 2]
    assert run_ids == {f"{g.group_id}#{sample}" for g in groups for sample in (0, 1)}
    assert right == records[0]
    assert right.messages[-1] == {"role": "assistant", "content": "4"}
    assert (right.final_text, right.termination_reason, right.split, right.num_turns) == ("4", "finished", "eval", 1)
    assert (right.rewards, right.raw_rewards, right.filled, right.reward) == (
        {"correct": 1.0, "bonus": 0.25}, {"correct": 1.0, "bonus": 0.25}, frozenset(), 1.25
    )  # fmt: skip
    assert right.sampling["seed"] in (3, 4)
    assert right.prompt_tokens > 0 and right.completion_tokens == 1
    assert right.turns[0].finish_reason == "stop"
    assert right.seconds == pytest.approx(right.ended_at - right.started_at)
    assert [(entry.logger, entry.phase, entry.message) for entry in logs] == [
        ("scored_env", "reward", f"scored {right.rollout_id}: '4'")
    ]
    failed = [r for r in records if r.termination_reason == "model_error"]
    assert len(failed) == 2
    assert all(not r.scored and r.filled == {"correct", "bonus"} and r.reward == 0.0 for r in failed)
    assert meta["status"] == "completed" and meta["model"] == "scripted" and meta["kind"] == "eval"
    assert meta["config"]["group_size"] == 2 and meta["config"]["env"] == ENV_SPEC


def test_a_run_opened_for_reading_cannot_write(live_run):
    with open_run(live_run) as run, pytest.raises(sqlite3.OperationalError, match="readonly"):
        run.sql("DELETE FROM rollouts")


def test_open_run_on_a_directory_without_a_run_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no benchmax run at .*empty \(run\.sqlite not found\)"):
        open_run(tmp_path / "empty")


def test_a_jsonl_export_reads_back_into_the_same_records(live_run, tmp_path):
    with open_run(live_run) as run:
        count = export_run(run, tmp_path / "out" / "rollouts.jsonl")
        records = list(run.rollouts())

    assert count == 4
    assert list(read_jsonl_export(tmp_path / "out" / "rollouts.jsonl")) == records
    lines = [orjson.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_bytes().splitlines()]
    assert [len(line["logs"]) for line in lines] == [
        1 if record.termination_reason == "finished" else 0 for record in records
    ]
    assert all(sorted(line["filled"]) == line["filled"] for line in lines)


def test_a_parquet_export_has_one_row_per_rollout_with_a_column_per_reward_component(live_run, tmp_path):
    with open_run(live_run) as run:
        count = export_run(run, tmp_path / "rollouts.parquet", "parquet")
        records = list(run.rollouts())

    table = pq.read_table(tmp_path / "rollouts.parquet")
    rows = table.to_pylist()

    assert count == len(rows) == 4
    assert {"reward.correct", "reward.bonus", "raw_reward.correct", "raw_reward.bonus"} <= set(table.column_names)
    assert str(table.schema.field("reward.bonus").type) == "double"
    for record, exported in zip(records, rows, strict=True):
        assert exported["rollout_id"] == record.rollout_id
        assert {name: exported[f"reward.{name}"] for name in ("correct", "bonus")} == record.rewards
        raw = {name: exported[f"raw_reward.{name}"] for name in ("correct", "bonus")}
        assert {name: value for name, value in raw.items() if value is not None} == record.raw_rewards
        assert orjson.loads(exported["messages"]) == record.messages
        assert set(exported["filled"]) == record.filled
        assert (exported["reward"], exported["termination_reason"]) == (record.reward, record.termination_reason)


def test_an_unknown_export_format_is_refused(live_run, tmp_path):
    with open_run(live_run) as run, pytest.raises(ValueError, match="unknown export format 'csv'; use one of jsonl"):
        export_run(run, tmp_path / "out.csv", "csv")


def _group(name: str, index: int, *rewards: dict[str, float]) -> GroupWrite:
    outcomes = tuple(
        RolloutOutcome(rewards=value, termination_reason="finished", rollout_id=f"{name}#{sample}", example_id=name)
        for sample, value in enumerate(rewards)
    )
    return GroupWrite(name, name, index, 0, outcomes, tuple(range(len(outcomes))))


def test_a_reader_sees_each_group_whole_once_the_writer_flushes(tmp_path):
    writer = RunWriter.create(tmp_path / "run", {"status": "running"})
    writer.add_examples("train", [Example("a", {"prompt_messages": [{"role": "user", "content": "a"}]})])
    with open_run(tmp_path / "run") as run:
        writer.write_group(_group("a", 0, {"x": 1.0}, {"x": 0.0}, {"x": 1.0}))
        writer.flush()
        assert [(r.rollout_id, r.rewards) for r in run.rollouts()] == [
            ("a#0", {"x": 1.0}), ("a#1", {"x": 0.0}), ("a#2", {"x": 1.0})
        ]  # fmt: skip
    writer.close()


def test_a_resumed_writer_keeps_the_stored_order_and_the_fill_is_idempotent(tmp_path):
    first = RunWriter.create(tmp_path / "run", {"status": "running"})
    first.write_group(_group("a", 0, {"x": 1.0}, {}))
    first.close()
    second = RunWriter.resume(tmp_path / "run")
    second.write_group(_group("b", 1, {"y": 2.0}))
    second.fill_batch(0)
    second.fill_batch(0)
    assert second.completed_groups() == {"a", "b"}
    second.close()

    with open_run(tmp_path / "run") as run:
        assert [(r.rollout_id, r.rewards, sorted(r.filled), r.reward) for r in run.rollouts()] == [
            ("a#0", {"x": 1.0, "y": 0.0}, ["y"], 1.0),
            ("a#1", {"x": 0.0, "y": 0.0}, ["x", "y"], 0.0),
            ("b#0", {"x": 0.0, "y": 2.0}, ["x"], 2.0),
        ]
        assert [seq for (seq,) in run.sql("SELECT seq FROM rollouts ORDER BY seq")] == [0, 1, 2]


def test_creating_over_an_existing_run_or_resuming_a_missing_one_is_refused(tmp_path):
    RunWriter.create(tmp_path / "run", {}).close()

    with pytest.raises(StoreError, match="already holds a run; continue it with --resume"):
        RunWriter.create(tmp_path / "run", {})
    with pytest.raises(StoreError, match=r"holds no run to resume \(run\.sqlite not found\)"):
        RunWriter.resume(tmp_path / "nothing")


def test_a_run_directory_with_uri_characters_in_its_name_opens_for_reading(tmp_path):
    run_dir = tmp_path / "odd name #1?mode=rw%20"
    RunWriter.create(run_dir, {"label": "odd"}).close()

    with open_run(run_dir) as run:
        assert run.meta == {"label": "odd"}
    assert sorted(path.name for path in tmp_path.iterdir()) == [run_dir.name], "no stray database file"


def _rollout_indexes(db: Path) -> dict[str, tuple[int, str]]:
    conn = sqlite3.connect(db)
    try:
        return {
            name: (unique, origin) for _, name, unique, origin, _ in conn.execute("PRAGMA index_list('rollouts')")
        }
    finally:
        conn.close()


def test_a_rescores_bulk_copy_builds_the_rollout_indexes_when_it_closes_or_when_a_killed_one_is_reopened(
    tmp_path, make_run
):
    source = make_run(tmp_path / "source", {"a": [{"x": 1.0}, {"x": 0.0}], "b": [{"x": 1.0}, {}]})
    expected = _rollout_indexes(source / "run.sqlite")
    assert expected["rollouts_by_id"] == (1, "c")

    writer = RunWriter.create(tmp_path / "copy", {})
    writer.adopt(source)
    assert _rollout_indexes(tmp_path / "copy" / "run.sqlite") == {}, "the copy builds its indexes once, at the end"
    writer.close()
    assert _rollout_indexes(tmp_path / "copy" / "run.sqlite") == expected

    killed = RunWriter.create(tmp_path / "killed", {})
    killed.adopt(source)
    killed._conn.close()  # as if the process died here: no close(), no indexes
    RunWriter.resume(tmp_path / "killed").close()
    assert _rollout_indexes(tmp_path / "killed" / "run.sqlite") == expected


def test_a_file_whose_ids_are_unique_by_column_constraint_keeps_it_and_gets_no_second_index(tmp_path):
    RunWriter.create(tmp_path / "run", {}).close()
    conn = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'rollouts'").fetchone()[0]
    conn.executescript(  # the layout before rollouts_by_id: the uniqueness was part of the table
        "DROP TABLE rollouts;" + ddl.replace("rollout_id TEXT NOT NULL,", "rollout_id TEXT NOT NULL UNIQUE,")
    )
    conn.close()

    writer = RunWriter.resume(tmp_path / "run")
    writer.write_group(_group("a", 0, {"x": 1.0}))
    writer.close()

    indexes = _rollout_indexes(tmp_path / "run" / "run.sqlite")
    assert "rollouts_by_id" not in indexes
    assert [origin for unique, origin in indexes.values() if unique] == ["u"]
    assert "rollouts_by_reward" in indexes
    conn = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("INSERT INTO rollouts SELECT seq + 1, rollout_id, group_id, example_id, sample_index, step,"
                     " batch, split, termination_reason, error, scored, reward, prompt_tokens, completion_tokens,"
                     " num_turns, num_tool_calls, started_at, ended_at, seconds, final_text, trace_id"
                     " FROM rollouts")  # fmt: skip
    conn.close()
