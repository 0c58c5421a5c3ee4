"""The live progress line: its rate reads right for slow and fast models alike; it says what it waits for."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from benchmax.cli._progress import LiveProgress, load_text, rate_text


def test_a_slow_model_shows_a_rate_above_zero():
    # the embedded model on two cores: 8 rollouts in 272 s
    assert rate_text(8, 272.0) == "0.029 rollouts/s"
    assert rate_text(1, 3600.0) == "0.00028 rollouts/s"


def test_a_fast_run_shows_whole_rollouts_with_thousands_separated():
    assert rate_text(60_000, 40.0) == "1,500 rollouts/s"
    assert rate_text(25, 10.0) == "2.5 rollouts/s"


def test_nothing_done_yet_reads_zero():
    assert rate_text(0, 5.0) == "0.0 rollouts/s"


def _shown(live) -> str:
    console = Console(file=io.StringIO(), width=100, record=True)
    console.print(live._render())
    return "\n".join(" ".join(line.split()) for line in console.export_text().splitlines())


def test_the_progress_says_the_model_is_starting_then_where_the_rollouts_are():
    live = LiveProgress(Console(file=io.StringIO(), width=100), starting="starting the model")
    assert "model starting the model…" in _shown(live)

    live.on_start(total_rollouts=8, done_rollouts=0, run_dir=Path("run"))
    assert "starting the model" not in _shown(live)

    live.on_load(in_flight=8, waiting=7)
    assert "in flight 8 rollouts, 7 of them waiting for the model" in _shown(live)
    live.on_load(in_flight=1, waiting=0)
    assert "in flight 1 rollout\n" in _shown(live)


def test_the_block_left_on_screen_after_the_run_shows_nothing_in_flight():
    console = Console(file=io.StringIO(), width=100)
    with LiveProgress(console, starting="starting the model") as live:
        live.on_start(total_rollouts=2, done_rollouts=0, run_dir=Path("run"))
        live.on_load(in_flight=2, waiting=1)
    assert "in flight" not in _shown(live) and "starting" not in _shown(live)


def test_where_the_rollouts_are_reads_in_words():
    assert load_text(8, 7) == "8 rollouts, 7 of them waiting for the model"
    assert load_text(1, 0) == "1 rollout"
    assert load_text(0, 0) == "0 rollouts"
