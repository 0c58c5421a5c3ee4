"""The closed vocabulary of termination reasons.

``RolloutFailure(reason)`` may add env-specific reasons; every one of those is an
operational failure (no reward components).
"""

from __future__ import annotations

from enum import StrEnum


class TerminationReason(StrEnum):
    FINISHED = "finished"
    """The model gave a final answer (no tool calls) within its budgets."""
    MAX_TURNS_EXCEEDED = "max_turns_exceeded"
    """The model was still calling tools when ``max_turns`` model turns were used."""
    TOOL_BUDGET_EXCEEDED = "tool_budget_exceeded"
    """A turn asked for more tool calls than ``max_tool_calls`` leaves."""
    OUTPUT_EXCEEDED = "output_exceeded"
    """The server stopped the completion for length (``finish_reason == "length"``)."""
    CONTEXT_EXCEEDED = "context_exceeded"
    """The server refused the prompt as longer than the model's context."""
    MODEL_ERROR = "model_error"
    """The model server failed (after retries) or answered something unusable."""
    TOOL_ERROR = "tool_error"
    """``run_tool`` raised an unexpected exception (its traceback is logged)."""
    TIMEOUT = "timeout"
    """A model request, tool call or the whole rollout ran past its time limit."""
    REWARD_ERROR = "reward_error"
    """``compute_reward`` raised or returned something other than finite numbers."""
    GROUP_REWARD_ERROR = "group_reward_error"
    """``compute_group_rewards`` raised or returned something unusable."""
    CANCELLED = "cancelled"
    """The rollout's task was cancelled while its run went on."""
    CONTEXT_ERROR = "context_error"
    """``rollout_context`` failed to set up or tear down."""


SCORABLE_REASONS: frozenset[str] = frozenset(
    {
        TerminationReason.FINISHED,
        TerminationReason.MAX_TURNS_EXCEEDED,
        TerminationReason.TOOL_BUDGET_EXCEEDED,
        TerminationReason.OUTPUT_EXCEEDED,
        TerminationReason.CONTEXT_EXCEEDED,
    }
)
"""Budget stops are the model's doing, so they are scored like a finished rollout."""


def is_scorable(reason: str) -> bool:
    return reason in SCORABLE_REASONS
