"""One rollout on its way to an outcome: its mutable state, its turns, and the deadline that waits out outages.

An attempt is what the engine fills in while a rollout runs (messages, turns, the reason it
ended, its rewards) and turns into a frozen ``RolloutOutcome`` once its group is settled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from benchmax.client import ChatResult
from benchmax.engine._logs import LogSink
from benchmax.envs import (
    Message,
    RolloutRequest,
    TerminationReason,
    TurnRecord,
    settle_termination_reason,
)


@dataclass(slots=True)
class _Attempt:
    request: RolloutRequest[Any]
    messages: list[Message]
    example_args: dict[str, Any]
    started_at: float
    sink: LogSink
    turns: list[TurnRecord] = field(default_factory=list)
    reason: str = TerminationReason.FINISHED
    error: str | None = None
    rewards: dict[str, float] | None = None
    scoring_error: str | None = None
    ended_at: float = 0.0
    ran_standard: bool = False
    span: Any = None
    """The rollout's root span while it is traced and not yet settled (``benchmax.telemetry``)."""
    trace_id: str | None = None

    def fail(self, reason: str, error: str) -> None:
        """An operational failure: this reason, no rewards."""
        self.reason = reason
        self.error = error or reason
        self.rewards = None

    def settle(self, failure_reason: str, error: str) -> None:
        """A scoring failure: relabels a clean finish, keeps a budget stop's reason (0.2.x).

        Either way the attempt is unscored from here on (``scoring_error``), so the
        group hook skips it and no component is stored beside the error. The
        error says the scoring failed even when a budget stop had its own message.
        """
        message = error or failure_reason
        if self.scoring_error is None:
            self.scoring_error = message
            self.error = message if self.error is None else f"{message} (the rollout had stopped: {self.error})"
        self.reason = settle_termination_reason(self.reason, failure_reason)
        self.rewards = None

    @property
    def scorable(self) -> bool:
        """Still on its way to a score: no scoring hook has failed for it."""
        return self.scoring_error is None


class _PausedDeadline:
    """The rollout's deadline stops while its requests wait for a down endpoint, then goes on."""

    def __init__(self) -> None:
        self._deadline: asyncio.Timeout | None = None
        self._paused = 0
        self._left: float | None = None

    def bind(self, deadline: asyncio.Timeout) -> None:
        """The deadline exists only once the rollout's timeout is entered, inside the scope that carries this clock."""
        self._deadline = deadline

    def pause(self) -> None:
        self._paused += 1
        if self._deadline is None:
            return
        when = self._deadline.when()
        if self._paused == 1 and when is not None and not self._deadline.expired():
            self._left = when - asyncio.get_running_loop().time()
            self._deadline.reschedule(None)

    def resume(self) -> None:
        self._paused -= 1
        if self._deadline is None:
            return
        if self._paused == 0 and self._left is not None and not self._deadline.expired():
            self._deadline.reschedule(asyncio.get_running_loop().time() + self._left)
            self._left = None


def _turn_record(
    turns: list[TurnRecord],
    index: int,
    started_at: float,
    model_seconds: float,
    result: ChatResult,
    tool_seconds: float = 0.0,
    tool_calls: int = 0,
    tool_errors: tuple[str, ...] = (),
) -> None:
    turns.append(
        TurnRecord(
            index=index,
            started_at=started_at,
            model_seconds=model_seconds,
            tool_seconds=tool_seconds,
            finish_reason=result.finish_reason,
            usage=result.usage,
            tool_calls=tool_calls,
            prompt_token_ids=result.prompt_token_ids,
            completion_token_ids=result.completion_token_ids,
            completion_logprobs=result.completion_logprobs,
            tool_errors=tool_errors,
            policy_version=result.policy_version,
        )
    )
