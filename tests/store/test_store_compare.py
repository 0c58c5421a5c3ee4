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


def _examples_run(path: Path, rewards: dict[str, list[dict[str, float]]]) -> Path:
    writer = RunWriter.create(path, {"pass_threshold": 1.0})
    writer.add_examples(
        "eval", [Example(name, {"prompt_messages": [{"role": "user", "content": name}]}) for name in rewards]
    )
    for index, (name, values) in enumerate(rewards.items()):
        outcomes = tuple(
            RolloutOutcome(rewards=value, termination_reason="finished", rollout_id=f"{name}#{i}", example_id=name)
            for i, value in enumerate(values)
        )
        writer.write_group(GroupWrite(f"eval/{name}", name, index, 0, outcomes, tuple(range(len(outcomes)))))
    writer.fill_batch(0)
    writer.close()
    return path


def test_examples_in_one_run_only_are_listed_but_left_out_of_the_means(tmp_path):
    a = _examples_run(tmp_path / "a", {
        "only-a": [{"r": 9.0}], "both-1": [{"r": 0.0}, {"r": 1.0}], "both-2": [{"r": 1.0, "s": 2.0}],
    })  # fmt: skip
    b = _examples_run(tmp_path / "b", {
        "both-1": [{"r": 1.0}, {"r": 1.0}], "both-2": [{"r": 0.0, "s": 4.0}], "only-b": [{"r": 7.0}],
    })  # fmt: skip

    with RunQueries(a) as left, RunQueries(b) as right:
        page = compare(left, right)
    with open_run(a) as left, open_run(b) as right:
        result = diff_runs(left, right)

    assert (page["only_a"], page["only_b"], page["common"]) == (1, 1, 2)
    means = {row["component"]: (row["a"], row["b"]) for row in page["components"]}
    # both-1 lacks "s": the zero-fill gives its rollouts 0.0
    assert means == {"r": (2 / 3, 2 / 3), "s": (2 / 3, 4 / 3)}, "only the shared examples count"
    assert {delta.component: (delta.mean_a, delta.mean_b) for delta in result.components}["r"] == means["r"]
    rows = page["examples"]["rows"]
    assert page["examples"]["total"] == 4
    assert [row["example_id"] for row in rows] == ["both-2", "both-1", "only-b", "only-a"], (
        "largest change first, one-sided examples (no delta) last"
    )
    assert rows[2]["a"] is None and rows[2]["b"] == 7.0 and rows[2]["a_rollouts"] == 0
    assert rows[3]["b"] is None and rows[3]["a"] == 9.0 and rows[3]["b_rollouts"] == 0


def test_runs_of_the_same_examples_compare_every_component(tmp_path):
    a = _examples_run(tmp_path / "a", {"x": [{"r": 0.0, "s": 1.0}], "y": [{"r": 1.0}]})
    b = _examples_run(tmp_path / "b", {"x": [{"r": 1.0, "s": 3.0}], "y": [{"r": 1.0}]})

    with RunQueries(a) as left, RunQueries(b) as right:
        page = compare(left, right, changed_only=True)

    assert (page["only_a"], page["only_b"], page["common"]) == (0, 0, 2)
    assert {row["component"]: row["delta"] for row in page["components"]} == {"r": 0.5, "s": 1.0}, "y's s filled: 0"
    assert [row["example_id"] for row in page["examples"]["rows"]] == ["x"], "unchanged examples filtered out"
    assert page["examples"]["rows"][0]["components"] == {"r": 1.0, "s": 2.0}


def test_the_pass_rate_delta_counts_the_common_examples_only_when_the_runs_example_sets_differ(tmp_path):
    same = {"both-1": [{"r": 1.0}, {"r": 0.0}], "both-2": [{"r": 0.0}]}
    a = _examples_run(tmp_path / "a", same)
    b = _examples_run(tmp_path / "b", {**same, "only-b": [{"r": 1.0}, {"r": 1.0}, {"r": 1.0}]})

    with RunQueries(a) as left, RunQueries(b) as right:
        page = compare(left, right)

    assert page["headline"]["a"]["pass_rate"] != page["headline"]["b"]["pass_rate"], "the whole runs differ"
    assert page["shared_pass"] == {"a": 1 / 3, "b": 1 / 3}, "no common example changed: no pass-rate delta"
    with RunQueries(a) as left, RunQueries(a) as right:
        assert compare(left, right)["shared_pass"] is None, "the same examples: whole-run rates are common"
