"""benchmax 0.2.5's rules that the engine applies, each named once, where the engine decides it."""

from __future__ import annotations

from collections.abc import Mapping

from benchmax.envs import TerminationReason


def _check_failure_rewards(raw: object, rollout_id: str, reason: str) -> None:
    """A failed rollout that brings non-zero rewards is an env bug: it fails loudly (as in 0.2.x),
    here as this rollout's ``harness_error`` with the traceback logged, rather than losing the rewards."""
    if not isinstance(raw, Mapping):
        return
    nonzero = sorted(str(key) for key, value in raw.items() if value != 0)
    if nonzero:
        raise ValueError(
            f"run_rollout returned non-zero rewards {nonzero[:5]} for rollout {rollout_id!r}, which ended "
            f"{reason!r} (not a scorable reason): a failed rollout carries no reward signal; return rewards "
            "only for a scorable reason, or add the reason to scorable_termination_reasons"
        )


def _finish_reason(finish_reason: str | None) -> str:
    """How a turn without tool calls ends the rollout, as 0.2.x maps the server's finish reason."""
    if finish_reason == "stop":
        return TerminationReason.FINISHED
    if finish_reason == "length":
        return TerminationReason.OUTPUT_EXCEEDED
    reason = finish_reason.strip() if isinstance(finish_reason, str) else ""
    if not reason or len(reason) > 64:
        return TerminationReason.MODEL_ERROR
    return reason
