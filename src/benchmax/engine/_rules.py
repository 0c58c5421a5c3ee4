"""benchmax 0.2.5's rules that the engine applies, each named once and called where the engine decides it.

The engine settles every rollout the way 0.2.5 did, so a trainer or a score moved
from 0.2.5 sees the same reasons and rewards. Each rule is one function here; the
engine calls it at the one place the decision is made. One rule lives in the
contract instead, because 0.2.x's ``Environment`` applies it too:
:func:`benchmax.envs.settle_termination_reason` (a scoring failure relabels only a
clean finish; a budget stop keeps its reason).
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from benchmax.engine._scoring import InvalidRewards
from benchmax.envs import TerminationReason


def turn_end_reason(finish_reason: str | None) -> str:
    """0.2.5's rule for how a turn without tool calls ends the rollout, from the server's finish reason:
    ``stop`` finishes, ``length`` is ``output_exceeded``, and a missing or unreadable one is a model error."""
    if finish_reason == "stop":
        return TerminationReason.FINISHED
    if finish_reason == "length":
        return TerminationReason.OUTPUT_EXCEEDED
    reason = finish_reason.strip() if isinstance(finish_reason, str) else ""
    if not reason or len(reason) > 64:
        return TerminationReason.MODEL_ERROR
    return reason


def reject_failure_rewards(raw: object, rollout_id: str, reason: str) -> None:
    """0.2.5's rule for a failed rollout's rewards: a failed rollout that brings non-zero rewards is an
    env bug and fails loudly, here as this rollout's ``harness_error`` with the traceback logged, rather
    than losing the rewards."""
    if not isinstance(raw, Mapping):
        return
    nonzero = sorted(str(key) for key, value in raw.items() if value != 0)
    if nonzero:
        raise ValueError(
            f"run_rollout returned non-zero rewards {nonzero[:5]} for rollout {rollout_id!r}, which ended "
            f"{reason!r} (not a scorable reason): a failed rollout carries no reward signal; return rewards "
            "only for a scorable reason, or add the reason to scorable_termination_reasons"
        )


def goes_to_scoring(reason: str, scorable_reasons: Container[str], scoring_failed: bool) -> bool:
    """0.2.5's rule for who is scored: a rollout whose reason is scorable for its env (a finish, or a
    budget stop, which is the model's doing) and whose scoring has not failed. Only these run the reward
    hooks' group part (``compute_group_rewards`` sees only them) and keep their components."""
    return reason in scorable_reasons and not scoring_failed


def require_a_component(rewards: Mapping[str, float], reason: str, rollout_id: str) -> None:
    """0.2.5's rule for a finish with nothing to score: a finished rollout whose hooks together gave no
    reward component fails its group (``group_reward_error``); a budget stop may have none (zero-filled)."""
    if not rewards and reason == TerminationReason.FINISHED:
        raise InvalidRewards(
            f"rollout {rollout_id!r} finished with no reward component; make compute_reward "
            "or compute_group_rewards return at least one for every finished rollout"
        )
