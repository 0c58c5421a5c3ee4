"""Whether a finished run did its job: the rule behind ``benchmax eval``'s exit code.

Scripts and CI run benchmax and read the exit code, so a run that produced no
signal must not exit 0: a run fails when no rollout could be scored, or when
operational failures (model errors, tool crashes, timeouts, broken rewards)
exceed ``max_failure_rate`` of its rollouts. Budget stops are the model's doing
and count as scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmax.store import RunStats, RunWriter


@dataclass(frozen=True, slots=True)
class RunVerdict:
    ok: bool
    reason: str | None = None
    """Why the run failed, in one sentence (``None`` when it is ok)."""
    dominant: str | None = None
    """The most common failure reason, if any rollout failed."""
    first_error: str | None = None
    """The first error text stored for the dominant failure."""

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def judge_run(stats: RunStats, max_failure_rate: float) -> RunVerdict:
    """The verdict on a run from its figures (every rollout stored, resumed sessions included)."""
    dominant = next(iter(stats.errors), None)
    first_error = stats.first_errors.get(dominant) if dominant is not None else None
    failed = stats.failures
    if stats.rollouts == 0:
        return RunVerdict(False, "the run holds no rollouts", dominant, first_error)
    if stats.scored == 0:
        return RunVerdict(
            False,
            f"no rollout could be scored: all {stats.rollouts} failed, most as {dominant} "
            f"({stats.errors.get(dominant, 0) if dominant else 0})",
            dominant,
            first_error,
        )
    rate = failed / stats.rollouts
    if rate > max_failure_rate:
        return RunVerdict(
            False,
            f"{failed} of {stats.rollouts} rollouts ({rate:.1%}) failed operationally, more than "
            f"--max-failure-rate {max_failure_rate:g}; most as {dominant} ({stats.errors.get(dominant, 0)})",
            dominant,
            first_error,
        )
    return RunVerdict(True, None, dominant, first_error)


def record_verdict(run_dir: Path, verdict: RunVerdict) -> None:
    """Keep a failed verdict in the run: its reason as the run's error.

    The status stays the lifecycle's (``completed``: every group ran and is stored, so
    ``--resume`` has nothing left to do), but the verdict is only known from the figures
    of the closed run, and without it the inspector would paint a run that exited 1 as a
    green ``completed``. A resume clears the error and judges the run again.
    """
    if verdict.ok:
        return
    writer = RunWriter.resume(run_dir)
    try:
        writer.update_meta(error=verdict.reason)
    finally:
        writer.close()
