"""The inspector's compare page and ``diff_runs`` are one computation; each run's own threshold counts."""

from __future__ import annotations

from pathlib import Path

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome
from benchmax.store import GroupWrite, RunQueries, RunWriter, compare, diff_runs


def _run(path: Path, threshold: float, rewards: list[float]) -> Path:
    writer = RunWriter.create(path, {"pass_threshold": threshold})
    writer.add_examples("eval", [Example("e", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcomes = tuple(
        RolloutOutcome(rewards={"r": value}, termination_reason="finished", rollout_id=f"e#{i}", example_id="e")
        for i, value in enumerate(rewards)
    )
    writer.write_group(GroupWrite("eval/e", "e", 0, 0, outcomes, tuple(range(len(outcomes)))))
    writer.fill_batch(0)
    writer.close()
    return path


def test_a_pass_threshold_of_zero_stays_zero_in_compare(tmp_path):
    a = _run(tmp_path / "a", 0.0, [0.0, 0.5])
    b = _run(tmp_path / "b", 1.0, [0.0, 1.0])

    with RunQueries(a) as left, RunQueries(b) as right:
        page = compare(left, right)

    (row,) = page["examples"]["rows"]
    assert (row["a_pass"], row["b_pass"]) == (1.0, 0.5), "every reward reaches a threshold of 0.0"
    assert row["pass_delta"] == -0.5
    assert (page["headline"]["a"]["pass_rate"], page["headline"]["b"]["pass_rate"]) == (1.0, 0.5)


def test_the_compare_page_and_diff_runs_report_the_same_deltas(tmp_path):
    a = _run(tmp_path / "a", 1.0, [0.0, 0.5])
    b = _run(tmp_path / "b", 1.0, [1.0, 1.0])

    with RunQueries(a) as left, RunQueries(b) as right:
        page = compare(left, right)
    with open_run(a) as left, open_run(b) as right:
        result = diff_runs(left, right)

    overall = {delta.component: delta.delta for delta in result.components}
    assert overall == {"reward": 0.75, "r": 0.75}
    assert [(row["component"], row["delta"]) for row in page["components"]] == [("r", overall["r"])]
    assert page["examples"]["rows"][0]["delta"] == overall["reward"]
