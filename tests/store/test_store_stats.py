"""The summary figures of a run, against a run whose every figure is computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from benchmax import open_run
from benchmax.cli._summary import render_summary
from benchmax.envs import Example, RolloutOutcome, TurnRecord, Usage
from benchmax.store import GroupWrite, RunWriter

# (rollout, rewards, termination reason, seconds); tokens: rollout k (1-based) has 10k prompt, k completion.
GROUPS = {
    "e1": [
        ("r1a", {"correct": 1.0, "fmt": 0.5}, "finished", 1.0),
        ("r1b", {"correct": 1.0, "fmt": 0.5}, "finished", 2.0),
    ],
    "e2": [("r2a", {"correct": 1.0}, "finished", 3.0), ("r2b", {"correct": 0.0}, "finished", 4.0)],
    "e3": [("r3a", {}, "model_error", 5.0), ("r3b", {"correct": 0.0, "fmt": 1.0}, "output_exceeded", 10.0)],
}


def write_hand_made_run(run_dir: Path) -> None:
    writer = RunWriter.create(run_dir, {"started_at": 1000.0, "ended_at": 1010.0, "pass_threshold": 1.0})
    examples = [Example(name, {"prompt_messages": [{"role": "user", "content": name}]}) for name in GROUPS]
    writer.add_examples("eval", examples)
    number = 0
    for index, (name, rollouts) in enumerate(GROUPS.items()):
        outcomes = []
        for rollout, rewards, reason, seconds in rollouts:
            number += 1
            usage = Usage(10 * number, number)
            outcomes.append(
                RolloutOutcome(
                    rewards=rewards,
                    termination_reason=reason,
                    error="HTTP 503" if not rewards else None,
                    rollout_id=rollout,
                    example_id=name,
                    split="eval",
                    messages=[{"role": "user", "content": name}, {"role": "assistant", "content": rollout}],
                    turns=(TurnRecord(index=0, started_at=1000.0, model_seconds=seconds, usage=usage),),
                    started_at=1000.0,
                    ended_at=1000.0 + seconds,
                )
            )
        writer.write_group(
            GroupWrite(f"eval/{name}", name, index, batch=0, outcomes=tuple(outcomes), sample_indices=(0, 1))
        )
    writer.fill_batch(0)
    writer.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_hand_made_run(tmp_path / "run")
    return tmp_path / "run"


def test_component_figures_are_taken_after_the_zero_fill(run_dir):
    with open_run(run_dir) as run:
        stats = run.stats()

    correct, fmt = stats.components["correct"], stats.components["fmt"]
    # correct: 1 1 | 1 0 | 0(filled) 0
    assert (correct.count, correct.mean, correct.std, correct.min, correct.max, correct.filled) == (
        6, 0.5, 0.5, 0.0, 1.0, 1
    )  # fmt: skip
    # fmt: .5 .5 | 0(filled) 0(filled) | 0(filled) 1
    assert (fmt.count, fmt.min, fmt.max, fmt.filled) == (6, 0.0, 1.0, 3)
    assert fmt.mean == pytest.approx(2 / 6)
    assert fmt.std == pytest.approx(math.sqrt(1.5 / 6 - (2 / 6) ** 2))
    assert list(stats.components) == ["correct", "fmt"]


def test_pass_rates_groups_reasons_latency_and_tokens_match_the_hand_count(run_dir):
    with open_run(run_dir) as run:
        stats = run.stats()

    # Totals after the fill: 1.5 1.5 | 1 0 | 0 1; a rollout passes at >= 1.0.
    assert (stats.rollouts, stats.scored, stats.failures, stats.passed) == (6, 5, 1, 4)
    assert stats.pass_rate == pytest.approx(4 / 6)
    # The lowest pass rates first, ties by id.
    assert [(e.example_id, e.passed, e.total, e.rate) for e in stats.examples] == [
        ("e2", 1, 2, 0.5), ("e3", 1, 2, 0.5), ("e1", 2, 2, 1.0)
    ]  # fmt: skip
    assert stats.example_count == 3
    assert (stats.groups, stats.groups_no_signal) == (3, 1)
    assert dict(stats.reasons) == {"finished": 4, "model_error": 1, "output_exceeded": 1}
    assert dict(stats.errors) == {"model_error": 1}
    # Nearest rank over 1 2 3 4 5 10 seconds.
    assert (stats.latency_p50, stats.latency_p95) == (3.0, 10.0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (210, 21)
    assert stats.wall_seconds == 10.0


def test_a_lower_pass_threshold_counts_more_passes(run_dir):
    with open_run(run_dir) as run:
        stats = run.stats(pass_threshold=0.0)

    assert (stats.passed, stats.pass_threshold) == (6, 0.0)


def test_the_summary_tables_print_the_figures(run_dir):
    console = Console(record=True, width=200, color_system=None)
    with open_run(run_dir) as run:
        render_summary(console, run.stats())
    text = console.export_text()

    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") >= 3}
    assert lines["correct"].split("│")[2:7] == [" 0.5000 ", " 0.5000 ", "   0 ", "   1 ", "      1 "]
    assert [cell.strip() for cell in lines["fmt"].split("│")[2:7]] == ["0.3333", "0.3727", "0", "1", "3"]
    assert "6 (5 scored, 1 failed)" in text
    assert "66.7% (4/6)" in text
    assert "1 of 3 (all siblings scored the same)" in text
    assert "3.00s / 10.00s" in text
    assert "210 / 21" in text
    assert "10.0s" in text
    for reason, count in (("finished", 4), ("model_error", 1), ("output_exceeded", 1)):
        assert [cell.strip() for cell in lines[reason].split("│")[1:3]] == [reason, str(count)]
    assert [[cell.strip() for cell in lines[name].split("│")[1:4]] for name in ("e1", "e2", "e3")] == [
        ["e1", "2/2", "100%"], ["e2", "1/2", "50%"], ["e3", "1/2", "50%"]
    ]  # fmt: skip


def test_a_run_of_single_rollout_groups_reports_learning_signal_as_not_applicable(tmp_path):
    writer = RunWriter.create(tmp_path / "single", {"pass_threshold": 1.0})
    writer.add_examples("eval", [Example("e1", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcome = RolloutOutcome(
        rewards={"correct": 1.0}, termination_reason="finished", rollout_id="r1", example_id="e1", split="eval"
    )
    writer.write_group(GroupWrite("eval/e1", "e1", 0, batch=0, outcomes=(outcome,), sample_indices=(0,)))
    writer.fill_batch(0)
    writer.close()
    with open_run(tmp_path / "single") as run:
        stats = run.stats()
    assert (stats.groups, stats.groups_single, stats.groups_no_signal) == (1, 1, 0)
    console = Console(record=True, width=160)
    render_summary(console, stats)
    assert "n/a: one rollout per group" in console.export_text()


def test_the_figures_kept_at_close_are_the_figures_computed_afresh(run_dir, tmp_path):
    import shutil
    import sqlite3

    from benchmax.store import RunQueries

    fresh = tmp_path / "fresh"
    shutil.copytree(run_dir, fresh)
    with sqlite3.connect(fresh / "run.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM figures").fetchone()[0] == 2, "the writer kept its figures"
        conn.execute("DELETE FROM figures")
    with open_run(run_dir) as kept, open_run(fresh) as computed:
        assert kept.stats() == computed.stats()
        assert kept.stats(pass_threshold=0.5) == computed.stats(pass_threshold=0.5)
    with RunQueries(run_dir) as kept, RunQueries(fresh) as computed:
        assert kept.overview() == computed.overview()
        assert kept.distributions() == computed.distributions()
