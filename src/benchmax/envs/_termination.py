"""The vocabulary of termination reasons: why a rollout ended, and whether it is scored.

Every reason benchmax itself emits is named here once. Env code may add its own
through ``RolloutFailure(reason, message)``; every such reason is an
operational failure (no reward components).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class TerminationReason(StrEnum):
    FINISHED = "finished"
    """The model gave a final answer (no tool calls) within its budgets, or the env's
    ``env_response`` ended the episode (``done=True``)."""
    MAX_TURNS_EXCEEDED = "max_turns_exceeded"
    """The model was still calling tools, or the env's ``env_response`` had not ended the
    episode, when ``max_turns`` model turns were used."""
    TOOL_BUDGET_EXCEEDED = "tool_budget_exceeded"
    """A turn asked for more tool calls than ``max_tool_calls`` leaves."""
    OUTPUT_EXCEEDED = "output_exceeded"
    """The server stopped the completion for length (``finish_reason == "length"``)."""
    CONTEXT_EXCEEDED = "context_exceeded"
    """The server refused the prompt as longer than the model's context."""
    MODEL_ERROR = "model_error"
    """The model server failed (after retries, or past the outage budget) or answered something unusable."""
    TOOL_ERROR = "tool_error"
    """``run_tool`` raised an unexpected exception (its traceback is logged)."""
    TIMEOUT = "timeout"
    """A model request, tool call or the whole rollout ran past its time limit."""
    REWARD_ERROR = "reward_error"
    """``compute_reward`` raised or returned something other than finite numbers."""
    GROUP_REWARD_ERROR = "group_reward_error"
    """``compute_group_rewards`` raised or returned something unusable, or a finished
    rollout ended with no reward component at all."""
    ENV_RESPONSE_ERROR = "env_response_error"
    """``env_response`` raised, or returned something other than an ``EnvResponse`` (or ``None``)
    that the engine can use: the error names the env's file and line."""
    CANCELLED = "cancelled"
    """The rollout's task was cancelled while its run went on."""
    CONTEXT_ERROR = "context_error"
    """``rollout_context`` or ``list_tools`` failed to set up or tear down."""
    HARNESS_ERROR = "harness_error"
    """The group could not be run at all: a custom ``Environment.run_group`` raised, or the
    worker running it died more often than the run allows."""
    JUDGE_ERROR = "judge_error"
    """An LLM judge failed for good or kept answering off-schema."""
    SANDBOX_ERROR = "sandbox_error"
    """A sandbox would not start, or died under the rollout."""
    MCP_ERROR = "mcp_error"
    """An MCP tool server could not be started, died or stopped answering."""
    ENV_UNAVAILABLE = "env_unavailable"
    """The env's own server (a remote env, ``benchmax serve``) stopped answering or lost the
    rollout's session: an env failure, not the model's. An eval run stops rather than store
    these, and ``--resume`` runs them again once the server is back."""


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
    """Whether a rollout that ended this way is scored (its reward hooks run)."""
    return reason in SCORABLE_REASONS


def is_scored(reason: str, rewards: Mapping[str, float] | None, scoring_error: str | None = None) -> bool:
    """Whether a settled rollout counts as scored: the one definition benchmax uses.

    Scored rollouts are the training signal: their components count, and a
    component they lack is zero-filled. A rollout is scored only when every
    scoring hook that ran for it succeeded: ``scoring_error`` (why
    ``compute_reward``/``compute_group_rewards`` failed) makes it a failure
    whatever its reason says. The reason alone cannot say so, because a budget
    stop keeps its reason when its scoring fails (0.2.x's rule, see
    :func:`settle_termination_reason`); a finished rollout whose scoring fails is
    relabelled ``reward_error``/``group_reward_error`` as well. Otherwise a
    scorable reason counts (a budget stop with no components of its own is
    zero-filled), and a reason an env adds to its
    ``scorable_termination_reasons`` counts when it brought rewards.
    """
    if scoring_error is not None:
        return False
    return reason in SCORABLE_REASONS or bool(rewards)


def settle_termination_reason(attempt_reason: str, failure_reason: str) -> str:
    """The reason a rollout keeps when its scoring fails with ``failure_reason``.

    A scoring failure relabels only a clean finish: a budget stop (the model ran
    out of turns, tokens or context) outranks a later scoring error, which is
    recorded in ``error`` instead (as in benchmax 0.2.x).
    """
    return failure_reason if attempt_reason == TerminationReason.FINISHED else attempt_reason
