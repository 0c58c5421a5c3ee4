"""A stored rollout's turns read back as the typed records the engine wrote (#31 item 3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome, TurnRecord, Usage
from benchmax.store import GroupWrite, RunWriter, _codec, export_run

TURNS = (
    TurnRecord(
        index=0, started_at=1.5, model_seconds=0.25, tool_seconds=0.5, finish_reason="tool_calls",
        usage=Usage(12, 3, 4), tool_calls=2, prompt_token_ids=(1, 2, 3), completion_token_ids=(4, 5),
        completion_logprobs=(-0.5, -0.25), tool_errors=("call-1",), policy_version=7,
    ),
    TurnRecord(index=1, started_at=2.0, model_seconds=0.125, finish_reason="stop", usage=Usage(20, 1)),
)  # fmt: skip


def _write(run_dir: Path) -> Path:
    writer = RunWriter.create(run_dir, {"started_at": 0.0, "ended_at": 1.0})
    writer.add_examples("eval", [Example("e1", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcome = RolloutOutcome(
        rewards={"correct": 1.0}, termination_reason="finished", rollout_id="eval/e1#0", example_id="e1",
        split="eval", messages=[{"role": "user", "content": "q"}], turns=TURNS,
    )  # fmt: skip
    writer.write_group(GroupWrite("eval/e1", "e1", 0, 0, (outcome,), (0,)))
    writer.fill_batch(0)
    writer.close()
    return run_dir


def test_a_records_turns_are_the_turn_records_the_engine_wrote_and_export_as_stored(tmp_path):
    run_dir = _write(tmp_path / "run")
    with open_run(run_dir) as run:
        (record,) = run.rollouts()
        export_run(run, tmp_path / "run.jsonl")
    assert record.turns == TURNS
    assert all(isinstance(turn, TurnRecord) for turn in record.turns)

    (line,) = [orjson.loads(text) for text in (tmp_path / "run.jsonl").read_bytes().splitlines()]
    assert record.to_dict()["turns"] == line["turns"]
    assert line["turns"][0]["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 4}
    assert line["turns"][0]["prompt_token_ids"] == [1, 2, 3] and line["turns"][0]["tool_errors"] == ["call-1"]


def test_turns_stored_by_an_older_or_newer_benchmax_still_read(tmp_path):
    run_dir = _write(tmp_path / "run")
    older = {"index": 0, "started_at": 1.0, "model_seconds": 0.5, "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    newer = {
        "index": 1, "started_at": 2.0, "model_seconds": 0.5, "finish_reason": "stop", "a_later_field": [1],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "cached_tokens": 1, "reasoning_tokens": 9},
    }  # fmt: skip
    with sqlite3.connect(run_dir / "run.sqlite") as conn:
        conn.execute("UPDATE transcripts SET turns = ?", (_codec.pack([older, newer]),))
    conn.close()

    with open_run(run_dir) as run:
        (record,) = run.rollouts()
    assert record.turns == (
        TurnRecord(index=0, started_at=1.0, model_seconds=0.5, usage=Usage(3, 1)),
        TurnRecord(index=1, started_at=2.0, model_seconds=0.5, finish_reason="stop", usage=Usage(5, 2, 1)),
    )
