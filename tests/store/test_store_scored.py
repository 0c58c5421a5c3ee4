"""One meaning of "scored", the contract's (:func:`benchmax.envs.is_scored`), in every reader of the store.

A budget stop whose scoring failed stays scored (0.2.x's rule: the zero-fill gives
it 0.0, its error says why); operational failures never are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome, is_scored
from benchmax.store import GroupWrite, RunQueries, RunWriter

# (termination reason, rewards, scored?)
CASES = [
    ("finished", {"correct": 1.0}, True),
    ("max_turns_exceeded", {"correct": 0.0}, True),
    ("output_exceeded", {}, True),
    ("group_reward_error", {}, False),
    ("model_error", {}, False),
    ("judge_error", {}, False),
]


@pytest.mark.parametrize(("reason", "rewards", "expected"), CASES)
def test_a_scorable_reason_or_a_reward_component_makes_a_rollout_scored(reason, rewards, expected):
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
    assert (stats.scored, stats.failures) == (3, 3)
    assert (overview["scored"], overview["failed"]) == (3, 3)
    assert examples[0]["failed"] == 3
    reasons = {item["reason"]: (item["count"], item["scored"]) for item in overview["reasons"]}
    assert reasons == {
        "finished": (1, 1),
        "max_turns_exceeded": (1, 1),
        "output_exceeded": (1, 1),
        "group_reward_error": (1, 0),
        "model_error": (1, 0),
        "judge_error": (1, 0),
    }
    assert dict(stats.errors) == {"group_reward_error": 1, "model_error": 1, "judge_error": 1}
