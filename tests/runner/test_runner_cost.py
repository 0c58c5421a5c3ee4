"""``max_cost``: the run stops once its calls cost the budget, every group it started is stored, and
a resume runs only what is left (no call is paid for twice).

The price file makes each reply cost exactly $1 (a one-token answer at $1 per
completion token, prompts free), so the budget is counted in replies.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax.runner import RunStopped, evaluate

EXAMPLES = 10


def _run(tmp_path: Path, server, **options):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."scripted"]\nprompt = 0\ncompletion = 1000000\n')
    return evaluate(
        ENV_SPEC,
        data_dir=tmp_path / "data",
        base_url=server.base_url,
        model="scripted",
        run_dir=tmp_path / "run",
        prices=str(prices),
        **options,
    )


def _stored(run_dir: Path) -> int:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
    finally:
        conn.close()


def test_groups_in_flight_when_the_budget_is_reached_finish_and_are_stored_and_none_starts_after(tmp_path, server):
    # Every reply sleeps, so several groups are in flight when the third reply reaches the budget.
    write_split(tmp_path / "data", [row(str(index), f"q{index}", sleep=0.3) for index in range(EXAMPLES)])

    with pytest.raises(RunStopped, match=r"reaching --max-cost \$2\.5") as stopped:
        _run(tmp_path, server, max_cost=2.5, concurrency=4)

    sent = server.counts["requests"]
    assert 3 <= sent < EXAMPLES
    assert _stored(tmp_path / "run") == sent, "every group that sent a request was stored, none abandoned"
    assert stopped.value.resume_options == ("--max-cost", "5")
    assert "every started group finished and stored" in str(stopped.value)

    result = _run(tmp_path, server, max_cost=100.0, concurrency=4, resume=True)

    assert result.verdict.ok and result.stats.rollouts == EXAMPLES
    assert server.counts["requests"] == EXAMPLES, "the resume ran only the groups left"
    assert result.cost is not None and result.cost["usd"] == pytest.approx(EXAMPLES)


def test_without_a_budget_the_cost_is_kept_but_nothing_stops(tmp_path, server):
    write_split(tmp_path / "data", [row(str(index), f"q{index}") for index in range(EXAMPLES)])

    result = _run(tmp_path, server)

    assert result.verdict.ok and result.stats.rollouts == EXAMPLES
    assert result.cost is not None and result.cost["usd"] == pytest.approx(EXAMPLES)
    assert [(call["role"], call["requests"]) for call in result.cost["calls"]] == [("policy", EXAMPLES)]
