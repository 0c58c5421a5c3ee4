"""Exports: what each rollout's line or row holds, the same whatever the parts, chunks and worker processes."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from benchmax import open_run
from benchmax.envs import Example, LogEntry, RolloutOutcome, SamplingParams
from benchmax.store import GroupWrite, RunWriter, export_run

GROUPS = 3_400  # groups of 3: 10,200 rollouts, two parts, and read chunks that cut groups


def _outcome(group: int, sample: int) -> RolloutOutcome:
    example = f"ex-{group}"
    rollout_id = f"{example}#{sample}"
    if group % 7 == 3 and sample == 1:
        return RolloutOutcome(
            rewards={}, termination_reason="model_error", error="HTTP 400: réponse refusée", rollout_id=rollout_id,
            example_id=example, messages=[{"role": "user", "content": "¿Cuánto es 2+2? 🤔"}],
        )  # fmt: skip
    rewards = {"correct": float((group + sample) % 2)}
    if group % 5 != 0:  # the rest leave "bonus" out: the batch's zero-fill adds it
        rewards["bonus"] = 0.1 * sample
    logs = (
        (LogEntry(1.5, "INFO", "scorer", f"scored {rollout_id}: «четыре»", "env.py", 7, 0, "reward"),)
        if group % 11 == 0
        else ()
    )
    return RolloutOutcome(
        rewards=rewards, termination_reason="finished", rollout_id=rollout_id, example_id=example, split="eval",
        messages=[{"role": "user", "content": "¿Cuánto es 2+2? 🤔"}, {"role": "assistant", "content": f"да {group}"}],
        logs=logs, started_at=10.0 + group, ended_at=10.25 + group,
        sampling=SamplingParams(seed=group % 3) if group % 2 else None,
    )  # fmt: skip


@pytest.fixture(scope="module")
def varied_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Failures, filled rewards, logs, non-ASCII text, examples with fields, groups cut by read chunks."""
    run_dir = tmp_path_factory.mktemp("export") / "run"
    writer = RunWriter.create(run_dir, {"status": "completed"})
    writer.add_examples(
        "eval",
        [
            Example(f"ex-{group}", {"prompt_messages": [{"role": "user", "content": "2+2"}], "answer": "4", "n": group})
            for group in range(GROUPS)
        ],
    )
    for group in range(GROUPS):
        outcomes = tuple(_outcome(group, sample) for sample in range(3))
        batch = group // 1000
        writer.write_group(GroupWrite(f"eval/ex-{group}", f"ex-{group}", group, batch, outcomes, (0, 1, 2)))
        if group % 1000 == 999 or group == GROUPS - 1:
            writer.fill_batch(batch)
    writer.close()
    return run_dir


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_each_line_holds_its_record_logs_example_fields_and_advantage_over_its_whole_group(varied_run, tmp_path):
    with open_run(varied_run) as run:
        count = export_run(run, tmp_path / "all.jsonl", workers=1)
        records = list(run.rollouts())
        logs = {record.rollout_id: run.logs(rollout_id=record.rollout_id) for record in records}
    lines = _lines(tmp_path / "all.jsonl")

    assert count == len(lines) == len(records) == 3 * GROUPS
    assert any(record.filled for record in records) and any(not record.scored for record in records)
    totals: dict[str, list[float]] = {}
    for record in records:
        totals.setdefault(record.group_id, []).append(record.reward or 0.0)
    for record, line in zip(records, lines, strict=True):
        assert line.pop("logs") == [
            {name: getattr(entry, name) for name in LogEntry.__dataclass_fields__} for entry in logs[record.rollout_id]
        ]
        assert line.pop("example_args") == {"answer": "4", "n": int(record.example_id.split("-")[1])}
        group = totals[record.group_id]
        mean = sum(group) / len(group)
        std = math.sqrt(sum((value - mean) ** 2 for value in group) / len(group))
        assert line.pop("advantage") == pytest.approx(((record.reward or 0.0) - mean) / std if std else 0.0)
        assert line == record.to_dict()
    assert sum(1 for line in lines if line["rewards"] != line["raw_rewards"]) > GROUPS // 2


def test_worker_processes_write_the_same_bytes_and_rows_as_one_process(varied_run, tmp_path):
    with open_run(varied_run) as run:
        for workers in (1, 2):
            export_run(run, tmp_path / f"{workers}.jsonl", workers=workers)
            export_run(run, tmp_path / f"{workers}.parquet", "parquet", workers=workers)

    assert (tmp_path / "1.jsonl").read_bytes() == (tmp_path / "2.jsonl").read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["1.jsonl", "1.parquet", "2.jsonl", "2.parquet"]
    assert pq.read_table(tmp_path / "1.parquet").equals(pq.read_table(tmp_path / "2.parquet"))


def test_an_export_beside_another_thread_starts_its_workers_fresh_and_writes_the_same(varied_run, tmp_path):
    release = threading.Event()
    other = threading.Thread(target=release.wait)  # a process with threads forks no workers
    other.start()
    try:
        with open_run(varied_run) as run:
            export_run(run, tmp_path / "spawned.jsonl", workers=2)
            export_run(run, tmp_path / "one.jsonl", workers=1)
    finally:
        release.set()
        other.join()

    assert (tmp_path / "spawned.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


def test_a_parquet_row_holds_the_same_values_as_the_jsonl_line(varied_run, tmp_path):
    with open_run(varied_run) as run:
        export_run(run, tmp_path / "all.jsonl", workers=1)
        export_run(run, tmp_path / "all.parquet", "parquet", workers=1)
    table = pq.read_table(tmp_path / "all.parquet")
    lines = _lines(tmp_path / "all.jsonl")

    assert table.num_rows == len(lines)
    for row, line in zip(table.to_pylist(), lines, strict=True):
        rewards, raw = line.pop("rewards"), line.pop("raw_rewards")
        for name in ("bonus", "correct"):
            assert (row.pop(f"reward.{name}"), row.pop(f"raw_reward.{name}")) == (rewards.get(name), raw.get(name))
        for key in ("example_args", "messages", "turns", "sampling", "logs"):
            row[key] = orjson.loads(row[key])
        assert row == line
