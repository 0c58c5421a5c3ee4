"""One meaning of "scored": a scorable end of the model loop and at least one reward component."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome
from benchmax.store import GroupWrite, RunQueries, RunWriter, is_scored

# (termination reason, rewards, scored?)
CASES = [
    ("finished", {"correct": 1.0}, True),
    ("max_turns_exceeded", {"correct": 0.0}, True),
    ("finished", {}, False),
    ("group_reward_error", {}, False),
    ("model_error", {}, False),
    ("model_error", {"correct": 1.0}, False),
]


@pytest.mark.parametrize(("reason", "rewards", "expected"), CASES)
def test_is_scored_needs_a_scorable_reason_and_a_component(reason, rewards, expected):
    assert is_scored(reason, rewards) is expected


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    writer = RunWriter.create(tmp_path / "run", {"pass_threshold": 1.0, "status": "completed"})
    writer.add_examples("eval", [Example("e", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcomes = tuple(
        RolloutOutcome(rewards=rewards, termination_reason=reason, rollout_id=f"e#{i}", example_id="e", split="eval")
        for i, (reason, rewards, _) in enumerate(CASES)
    )
    writer.write_group(GroupWrite("eval/e", "e", 0, 0, outcomes, tuple(range(len(outcomes)))))
    writer.fill_batch(0)
    writer.close()
    return tmp_path / "run"


def test_the_store_the_records_the_summary_and_the_inspector_count_the_same_rollouts_as_scored(run_dir):
    expected = [scored for _, _, scored in CASES]
    with open_run(run_dir) as run:
        column = [bool(scored) for (scored,) in run.sql("SELECT scored FROM rollouts ORDER BY seq")]
        records = [record.scored for record in run.rollouts()]
        stats = run.stats()
    with RunQueries(run_dir) as queries:
        rows = [row["scored"] for row in queries.rollouts().rows]
        overview = queries.overview()
        examples = queries.examples().rows

    assert column == records == rows == expected
    assert (stats.scored, stats.failures) == (2, 4)
    assert (overview["scored"], overview["failed"]) == (2, 4)
    assert examples[0]["failed"] == 4
    reasons = {item["reason"]: (item["count"], item["scored"]) for item in overview["reasons"]}
    assert reasons == {
        "finished": (2, 1),
        "max_turns_exceeded": (1, 1),
        "group_reward_error": (1, 0),
        "model_error": (2, 0),
    }
    assert dict(stats.errors) == {"finished": 1, "group_reward_error": 1, "model_error": 2}
