"""What a training run leaves as it goes: ``metrics.jsonl`` and the reward curve at every
log and save, and each step's figures in the run store with one line for a person."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from benchmax.train._envs import envs_from_logs, without_env_keys
from benchmax.train._plot import reward_curve
from benchmax.train._report import step_report

logger = logging.getLogger("benchmax.train")

CURVE = "reward_curve.png"
CURVES = "curves"
METRICS = "metrics.jsonl"


def write_logs(run_dir: Path, history: Sequence[Mapping[str, Any]], *, title: str, plot: bool = True) -> Path | None:
    with (run_dir / METRICS).open("wb") as handle:
        for entry in history:
            handle.write(orjson.dumps(dict(entry), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    return reward_curve(history, run_dir / CURVE, title=title) if plot else None


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class RunLogCallback(_callback_base()):  # type: ignore[misc]
    """Keeps ``metrics.jsonl`` and the reward curve current at every log and save."""

    def __init__(self, run_dir: Path, title: str, max_minutes: float | None = None) -> None:
        self.run_dir = run_dir
        self.title = title
        self.max_minutes = max_minutes
        self.started = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.max_minutes is not None and time.perf_counter() - self.started > 60 * self.max_minutes:
            logger.info("--max-minutes %g reached at step %d; stopping", self.max_minutes, state.global_step)
            control.should_training_stop = True
            control.should_save = True

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=False)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # The save as training stops is followed by ``run``'s own plots of every curve, so
        # the curve is drawn there once, not here too: matplotlib (1-6 s on 2 cores, its
        # import and font cache the first time) would otherwise sit in the training loop.
        stopping = bool(control.should_training_stop) or bool(state.max_steps and state.global_step >= state.max_steps)
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=not stopping)


class StepSession(Protocol):
    """What :class:`StepCallback` reads of the trainer's ``TrainingSession``."""

    bridge: Any
    run_session: Any
    components: Any
    envs: Any
    reporter: Any


class StepCallback(_callback_base()):  # type: ignore[misc]
    """At each step's log: the step's figures into the run store and one line for a person.

    The run store's ``steps`` row holds every figure TRL and the bridge logged
    for the step (rewards per component, dead groups, IS ratio, KL, staleness,
    timings) plus the rollouts the token check flagged, under the step number
    the step's rollouts carry. In a mixture it holds each env's figures as
    records under ``"envs"`` (``{name: EnvStep.to_json()}``) instead of TRL's
    flat ``env/<name>/...`` keys.
    """

    def __init__(self, session: StepSession) -> None:
        self.session = session

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not logs or "reward" not in logs:
            return
        trained = int(state.global_step)
        step = trained - 1  # the rollouts of the step that led to this update
        batch = self.session.bridge.history.pop(step, None)
        for old in [key for key in self.session.bridge.history if key < step]:
            del self.session.bridge.history[old]
        metrics: dict[str, Any] = {key: value for key, value in without_env_keys(logs).items() if _plain_number(value)}
        metrics["trainer_step"] = trained
        envs = batch.envs if batch is not None else envs_from_logs(logs)
        if envs:
            metrics["envs"] = {figures.env: figures.to_json() for figures in envs}
        if batch is not None:
            metrics["mismatched_rollouts"] = [
                {"rollout_id": check.rollout_id, "detail": check.detail}
                for check in batch.checks
                if check.status == "mismatch"
            ]
        if self.session.run_session is not None:
            try:
                self.session.run_session.record_step(step, metrics)
            except Exception:
                logger.exception("recording step %d in the run store failed", step)
        report = step_report(
            trained, int(args.max_steps or 0) or None, logs, self.session.components, envs=self.session.envs
        )
        if self.session.reporter is not None:
            self.session.reporter(report)
        else:
            logger.info("%s", report.line())


def _plain_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or isinstance(value, str)


def _write_logs_quiet(run_dir: Path, history: Sequence[Mapping[str, Any]], title: str, *, plot: bool) -> None:
    """Progress files must never stop a training step."""
    try:
        write_logs(run_dir, history, title=title, plot=plot)
    except Exception:
        logger.exception("writing %s failed", run_dir / METRICS)
