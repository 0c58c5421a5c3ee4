"""The step row a person reads: the same columns every step, figures from the step's log."""

from __future__ import annotations

from benchmax.train._report import step_report


def test_a_component_the_step_has_no_value_of_keeps_its_column_as_a_dash():
    logs = {
        "reward": 0.5,
        "generated/short": 0.25,
        "rewards/used_tool/mean": float("nan"),
        "groups/dead": 1.0,
        "groups/drawn": 3.0,
        "kl/sampler": 2e-3,
        "step_time": 1.3,
    }
    report = step_report(2, 5, logs, ["short", "used_tool"])
    cells = report.cells()
    assert list(cells)[:4] == ["step", "reward", "short", "used_tool"]
    assert (cells["step"], cells["reward"], cells["short"], cells["used_tool"]) == ("2/5", "0.500", "0.250", "-")
    assert (cells["dead"], cells["KL(sampler)"], cells["seconds"]) == ("1/3", "2.00e-03", "1.3")
    assert list(step_report(3, 5, {"reward": 0.1}, ["short", "used_tool"]).cells()) == list(cells)


def test_a_step_faster_than_a_tenth_of_a_second_keeps_its_significant_digits():
    def seconds(value: float) -> str:
        return step_report(1, 1, {"step_time": value}, []).cells()["seconds"]

    assert [seconds(value) for value in (12.34, 0.1, 0.042, 0.00037)] == ["12.3", "0.1", "0.042", "0.00037"]
