"""``diff_runs``: per-component and per-example reward deltas, B minus A, after the zero-fill."""

from __future__ import annotations

import pytest

from benchmax import open_run
from benchmax.store import diff_runs


def test_deltas_per_component_and_per_example_match_the_hand_count(tmp_path, make_run):
    make_run(tmp_path / "a", {
        "e1": [{"correct": 1.0}, {"correct": 0.0}],
        "e2": [{"correct": 1.0}, {"correct": 1.0}],
        "e3": [{"correct": 1.0}],
    })  # fmt: skip
    make_run(tmp_path / "b", {
        "e1": [{"correct": 1.0, "len": 2.0}, {"correct": 1.0, "len": 4.0}],
        "e2": [{"correct": 0.0}, {}],
        "e4": [{"correct": 1.0}],
    })  # fmt: skip

    with open_run(tmp_path / "a") as a, open_run(tmp_path / "b") as b:
        result = diff_runs(a, b)

    overall = {d.component: (d.mean_a, d.mean_b, d.delta, d.count_a, d.count_b) for d in result.components}
    assert list(overall) == ["reward", "correct", "len"]
    # Shared examples only (e1, e2): totals A .5 .5 | 1 1 -> .75; B 3 5 | 0 0 -> 2 (len and correct filled with 0).
    assert overall["reward"] == pytest.approx((0.75, 2.0, 1.25, 4, 4))
    assert overall["correct"] == pytest.approx((0.75, 0.5, -0.25, 4, 4))
    assert overall["len"] == (None, 1.5, None, 0, 4)
    per_example = {(d.component, d.example_id): (d.mean_a, d.mean_b, d.delta) for d in result.examples}
    assert per_example == {
        ("reward", "e1"): (0.5, 4.0, 3.5),
        ("reward", "e2"): (1.0, 0.0, -1.0),
        ("correct", "e1"): (0.5, 1.0, 0.5),
        ("correct", "e2"): (1.0, 0.0, -1.0),
        ("len", "e1"): (None, 3.0, None),
        ("len", "e2"): (None, 0.0, None),
    }
    assert (result.only_in_a, result.only_in_b) == (("e3",), ("e4",))


def test_a_run_against_itself_has_no_deltas(tmp_path, make_run):
    make_run(tmp_path / "a", {"e1": [{"correct": 1.0}, {}], "e2": [{"correct": 0.5}]})

    with open_run(tmp_path / "a") as a, open_run(tmp_path / "a") as same:
        result = diff_runs(a, same)

    assert {d.delta for d in result.components + result.examples} == {0.0}
    assert (result.only_in_a, result.only_in_b) == ((), ())
