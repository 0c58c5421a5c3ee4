"""The records that cross between env code, the engine and trainers (0.2.x's module path).

All frozen: a request or outcome is a fact once made, and the runner, store and
trainer may share one without copying. Field names and order match benchmax
0.2.x; the fields after those carry what benchmax records besides (the
transcript, per-turn timings and tokens, the rollout's own log records).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from benchmax.auth import ModelAuth
from benchmax.envs._records import LogEntry, SamplingParams, TurnRecord, Usage, total_usage
from benchmax.envs._termination import TerminationReason, is_scored
from benchmax.envs._types import MAX_REWARD_COMPONENTS, MAX_REWARD_NAME_CHARS, DatasetSplit, Messages, RewardMap
from benchmax.errors import BenchmaxError

__all__ = [
    "DatasetSplit",
    "Example",
    "RewardMap",
    "RolloutAttempt",
    "RolloutFailure",
    "RolloutOutcome",
    "RolloutRequest",
    "ValidationDiagnostic",
]

Payload = TypeVar("Payload")


@dataclass(frozen=True, slots=True)
class ValidationDiagnostic:
    """A configuration issue found before any rollout runs."""

    severity: Literal["warning", "error"]
    code: str
    message: str
    location: str | None = None


class RolloutFailure(BenchmaxError, RuntimeError):
    """Ends the rollout with ``termination_reason`` (a short snake_case word) and no reward.

    Raise it for operational failures that say nothing about the model's quality:
    a sandbox that would not start, a judge that returned garbage. The run goes
    on; the rollout is stored with the reason and the message. ``finished`` is
    refused: a failure is never a clean finish.
    """

    def __init__(self, termination_reason: str, message: str) -> None:
        if not isinstance(termination_reason, str) or not termination_reason.strip():
            raise ValueError("RolloutFailure needs a non-empty termination_reason, e.g. 'sandbox_error'")
        reason = termination_reason.strip()
        if reason == TerminationReason.FINISHED:
            raise ValueError("a RolloutFailure cannot terminate as 'finished'")
        if not isinstance(message, str) or not message.strip():
            raise ValueError("RolloutFailure needs a non-empty message saying what failed")
        super().__init__(message)
        self.termination_reason = reason
        self.message = message

    @property
    def reason(self) -> str:
        return self.termination_reason

    def __reduce__(self) -> tuple[type[RolloutFailure], tuple[str, str]]:
        return (type(self), (self.termination_reason, self.message))


@dataclass(frozen=True, slots=True)
class Example(Generic[Payload]):
    """One dataset item with a stable identity.

    For ``BaseEnv`` the payload is a JSON object holding ``prompt_messages`` plus
    any fields the reward reads later; other environments may carry any payload.
    The id survives re-ordering of the file, so resume and diff match examples
    across runs (within one env: a mixture's examples are told apart by ``env``).
    """

    id: str
    payload: Payload
    env: str | None = None
    """The name of the env this example belongs to, in a run of several envs (a mixture);
    ``None`` in a run of one env. The runner, the store and the trainer key per-env figures,
    zero-fill and groups by it, so two envs' examples never share a group or a fill."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError("Example.id must be a non-empty string")
        if self.env is not None and (not isinstance(self.env, str) or not self.env.strip()):
            raise ValueError("Example.env must be None or a non-empty env name")


@dataclass(frozen=True, slots=True)
class RolloutRequest(Generic[Payload]):
    """One rollout of one example against one model endpoint.

    ``model_auth`` authenticates every model request (``None``: no header, for
    local servers); ``sampling`` is passed to the server unchanged.
    """

    rollout_id: str
    example: Example[Payload]
    model: str
    base_url: str
    model_auth: ModelAuth | None = field(default=None, repr=False)
    split: DatasetSplit = "train"
    sampling: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        if not isinstance(self.rollout_id, str) or not self.rollout_id.strip():
            raise ValueError("RolloutRequest.rollout_id must be a non-empty string")
        if not isinstance(self.example, Example):
            raise TypeError("RolloutRequest.example must be a benchmax.envs.Example")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("RolloutRequest.model must be a non-empty string")
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise ValueError("RolloutRequest.base_url must be a non-empty string")
        if self.model_auth is not None and not isinstance(self.model_auth, ModelAuth):
            raise TypeError("RolloutRequest.model_auth must implement ModelAuth (headers_for_request) or be None")
        if self.split not in ("train", "eval"):
            raise ValueError(f"RolloutRequest.split must be 'train' or 'eval', got {self.split!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutAttempt:
    """One finished execution of a rollout, before group rewards are merged.

    ``rewards`` is ``None`` until the rollout is scored. ``error`` carries the
    first failure message; ``termination_reason`` stays what stopped the
    rollout, so a budget stop is never masked by a later scoring error.
    """

    rollout_id: str
    termination_reason: str
    rewards: RewardMap | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rollout_id, str) or not self.rollout_id.strip():
            raise ValueError("RolloutAttempt.rollout_id must be a non-empty string")
        check_termination_reason(self.termination_reason)
        if self.rewards is not None:
            check_reward_map(self.rewards)
        check_error(self.error)


@dataclass(frozen=True, slots=True)
class RolloutOutcome:
    """The settled result of one rollout, as trainers and the runner receive it.

    ``rewards`` is empty for operational failures; then ``error`` says why. The
    first three fields are 0.2.x's; ``scored`` applies the one definition of a
    scored rollout (:func:`benchmax.envs.is_scored`). ``scoring_error`` says why a
    scoring hook failed, when one did: a budget stop keeps its reason then (as in
    0.2.x), so only this field tells its failure from a scored budget stop.
    """

    rewards: RewardMap
    termination_reason: str
    error: str | None = None
    rollout_id: str = ""
    example_id: str = ""
    split: DatasetSplit = "train"
    messages: Messages = field(default_factory=list)
    turns: tuple[TurnRecord, ...] = ()
    logs: tuple[LogEntry, ...] = ()
    started_at: float = 0.0
    ended_at: float = 0.0
    sampling: SamplingParams | None = None
    scoring_error: str | None = None
    trace_id: str | None = None
    """The rollout's OpenTelemetry trace id (32 hex digits) when it was traced (``benchmax.telemetry``)."""

    def __post_init__(self) -> None:
        check_termination_reason(self.termination_reason)
        check_reward_map(self.rewards)
        check_error(self.error)
        check_error(self.scoring_error)
        if self.scoring_error is not None and self.rewards:
            raise ValueError("a rollout whose scoring failed carries no reward components")

    @property
    def usage(self) -> Usage:
        return total_usage(self.turns)

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def scored(self) -> bool:
        return is_scored(self.termination_reason, self.rewards, self.scoring_error)


def check_termination_reason(reason: Any) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("termination_reason must be a non-empty string")


def check_error(error: Any) -> None:
    if error is not None and (not isinstance(error, str) or not error.strip()):
        raise ValueError("error must be None or a non-empty string")


def check_reward_map(rewards: Any) -> None:
    if not isinstance(rewards, Mapping):
        raise TypeError(f"rewards must be a mapping of component to number, got {type(rewards).__name__}")
    if len(rewards) > MAX_REWARD_COMPONENTS:
        raise ValueError(f"rewards have {len(rewards)} components, more than the {MAX_REWARD_COMPONENTS} allowed")
    for key, value in rewards.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"reward keys must be non-empty strings, got {key!r:.80}")
        if len(key) > MAX_REWARD_NAME_CHARS:
            raise ValueError(
                f"reward key {key[:40]!r}... is {len(key)} characters, more than the {MAX_REWARD_NAME_CHARS} allowed"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"reward {key!r} must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError(f"reward {key!r} must be finite, got {value}")
