"""One meaning of "scored", the contract's (:func:`benchmax.envs.is_scored`), in every reader of the store.

A budget stop whose scoring failed keeps its reason (0.2.x's rule) but is not
scored: ``scoring_error`` says its hook failed, and every reader counts it as a
failure; operational failures never are scored.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome, is_scored
from benchmax.store import GroupWrite, RunQueries, RunWriter, export_run, read_jsonl_export

# (termination reason, rewards, scoring error, scored?)
CASES = [
    ("finished", {"correct": 1.0}, None, True),
    ("max_turns_exceeded", {"correct": 0.0}, None, True),
    ("output_exceeded", {}, None, True),
    ("group_reward_error", {}, "compute_group_rewards raised KeyError: 'x'", False),
    ("model_error", {}, None, False),
    ("judge_error", {}, None, False),
    ("tool_budget_exceeded", {}, "compute_reward returned 'score'=nan; rewards must be finite", False),
]


@pytest.mark.parametrize(("reason", "rewards", "scoring_error", "expected"), CASES)
def test_a_scorable_reason_or_a_reward_component_makes_a_rollout_scored_unless_its_scoring_failed(
    reason, rewards, scoring_error, expected
):
    assert is_scored(reason, rewards, scoring_error) is expected


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    writer = RunWriter.create(tmp_path / "run", {"pass_threshold": 1.0, "status": "completed"})
    writer.add_examples("eval", [Example("e", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcomes = tuple(
        RolloutOutcome(
            rewards=rewards,
            termination_reason=reason,
            error=scoring_error,
            rollout_id=f"e#{i}",
            example_id="e",
            split="eval",
            scoring_error=scoring_error,
        )
        for i, (reason, rewards, scoring_error, _) in enumerate(CASES)
    )
    writer.write_group(GroupWrite("eval/e", "e", 0, 0, outcomes, tuple(range(len(outcomes)))))
    writer.fill_batch(0)
    writer.close()
    return tmp_path / "run"


def test_the_store_the_records_the_summary_and_the_inspector_count_the_same_rollouts_as_scored(run_dir):
    expected = [scored for *_, scored in CASES]
    with open_run(run_dir) as run:
        column = [bool(scored) for (scored,) in run.sql("SELECT scored FROM rollouts ORDER BY seq")]
        records = [record.scored for record in run.rollouts()]
        stats = run.stats()
    with RunQueries(run_dir) as queries:
        rows = [row["scored"] for row in queries.rollouts().rows]
        overview = queries.overview()
        examples = queries.examples().rows

    assert column == records == rows == expected
    assert (stats.scored, stats.failures) == (3, 4)
    assert (overview["scored"], overview["failed"]) == (3, 4)
    assert examples[0]["failed"] == 4
    reasons = {item["reason"]: (item["count"], item["scored"]) for item in overview["reasons"]}
    assert reasons == {
        "finished": (1, 1),
        "max_turns_exceeded": (1, 1),
        "output_exceeded": (1, 1),
        "group_reward_error": (1, 0),
        "model_error": (1, 0),
        "judge_error": (1, 0),
        "tool_budget_exceeded": (1, 0),
    }
    assert dict(stats.errors) == {
        "group_reward_error": 1,
        "model_error": 1,
        "judge_error": 1,
        "tool_budget_exceeded": 1,
    }
    assert stats.first_errors["tool_budget_exceeded"].endswith("rewards must be finite")


def test_exports_carry_the_scored_column(run_dir, tmp_path):
    expected = [scored for *_, scored in CASES]
    with open_run(run_dir) as run:
        export_run(run, tmp_path / "out.jsonl", "jsonl", workers=1)
        export_run(run, tmp_path / "out.parquet", "parquet", workers=1)
    lines = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [line["scored"] for line in lines] == expected
    assert [record.scored for record in read_jsonl_export(tmp_path / "out.jsonl")] == expected
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_table(tmp_path / "out.parquet").column("scored").to_pylist() == expected
