"""The live progress line: its rate reads right for slow and fast models alike."""

from __future__ import annotations

from benchmax.cli._progress import rate_text


def test_a_slow_model_shows_a_rate_above_zero():
    # the embedded model on two cores: 8 rollouts in 272 s
    assert rate_text(8, 272.0) == "0.029 rollouts/s"
    assert rate_text(1, 3600.0) == "0.00028 rollouts/s"


def test_a_fast_run_shows_whole_rollouts_with_thousands_separated():
    assert rate_text(60_000, 40.0) == "1,500 rollouts/s"
    assert rate_text(25, 10.0) == "2.5 rollouts/s"


def test_nothing_done_yet_reads_zero():
    assert rate_text(0, 5.0) == "0.0 rollouts/s"
