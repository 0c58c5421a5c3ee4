"""The progress files a training run keeps current while it trains."""

from __future__ import annotations

import orjson
from transformers import TrainerControl, TrainerState, TrainingArguments

from benchmax.train._progress import CURVE, METRICS, RunLogCallback


def _state(step: int, max_steps: int) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    state.max_steps = max_steps
    state.log_history = [
        {"step": done, "reward": 0.1 * done, "rewards/correct/mean": 0.1 * done} for done in range(1, step + 1)
    ]
    return state


def test_a_save_mid_run_draws_the_curve_and_the_save_as_training_stops_leaves_it_to_run(tmp_path):
    """The save at the end is followed by ``run``'s own plots, so the curve is not drawn twice
    in the training loop; a save mid-run (a run that is killed later keeps it) draws it."""
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to="none", use_cpu=True)
    callback = RunLogCallback(tmp_path, "title")

    callback.on_save(args, _state(2, 4), TrainerControl())
    assert (tmp_path / CURVE).stat().st_size > 1000
    assert len((tmp_path / METRICS).read_bytes().splitlines()) == 2
    drawn = (tmp_path / CURVE).stat().st_mtime_ns

    callback.on_save(args, _state(4, 4), TrainerControl())
    stopped = TrainerControl()
    stopped.should_training_stop = True  # --max-minutes stops before max_steps
    callback.on_save(args, _state(3, 10), stopped)
    assert (tmp_path / CURVE).stat().st_mtime_ns == drawn
    lines = (tmp_path / METRICS).read_bytes().splitlines()
    assert [orjson.loads(line)["step"] for line in lines] == [1, 2, 3]
