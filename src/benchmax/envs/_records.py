"""The records that cross between env code, the engine, the store and trainers, in one home.

Messages and tools are plain OpenAI chat-format dicts on purpose: env authors
already know that format, every model server speaks it, and it serialises
straight into the run store without an adapter layer.

The records are frozen: a request or outcome is a fact once made, and the runner,
store and trainer may share one without copying. The rollout records' field names
and order match benchmax 0.2.x (``benchmax.envs.shared_types``, served from here by
the compat table); the fields after those carry what benchmax records besides (the
transcript, per-turn timings and tokens, the rollout's own log records).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from benchmax.auth import ModelAuth
from benchmax.envs._termination import TerminationReason, is_scored
from benchmax.errors import BenchmaxError

DatasetSplit: TypeAlias = Literal["train", "eval"]
"""Which traffic an example serves: training rollouts or evaluation."""

SPLITS: tuple[DatasetSplit, ...] = ("train", "eval")

Message: TypeAlias = dict[str, Any]
"""One OpenAI chat message: ``{"role": ..., "content": ...}`` plus tool fields."""

Messages: TypeAlias = list[Message]

Tool: TypeAlias = dict[str, Any]
"""An OpenAI function tool: ``{"type": "function", "function": {"name", "description",
"parameters"}}``; ``parameters`` is a JSON Schema object."""

RewardMap: TypeAlias = Mapping[str, float]

MAX_REWARD_COMPONENTS = 256
"""The most components one rollout's rewards may have (individual and group together).

A component is a named column of every reader (store rows, inspector tables,
exports, training metrics): an env that returns thousands of them, or one name
of a megabyte, has a bug, and its output would swell the store and every page
that shows it. Such rewards are refused as a ``reward_error``."""

MAX_REWARD_NAME_CHARS = 200
"""The longest a reward component's name may be (see :data:`MAX_REWARD_COMPONENTS`)."""

JsonRow: TypeAlias = dict[str, Any]
"""One JSON object read from a dataset file."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampling options passed through to the model server unchanged.

    ``extra_body`` carries server-specific fields (vLLM's ``top_k``,
    ``return_token_ids``...) merged into every request body.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    logprobs: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SamplingParams:
        """The inverse of ``dataclasses.asdict``, as a run store keeps it (``stop`` as a list)."""
        values = dict(data or {})
        if values.get("stop"):
            values["stop"] = tuple(values["stop"])
        return cls(**values)

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.seed is not None:
            body["seed"] = self.seed
        if self.stop:
            body["stop"] = list(self.stop)
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model reply (or a sum of them), as the server counted them.

    ``cached_tokens`` are the prompt tokens the server answered from its own
    prompt cache (OpenAI's ``prompt_tokens_details.cached_tokens``): part of
    ``prompt_tokens``, often billed at a lower price; 0 when the server does
    not say.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What one model turn cost and, when the server returns them, its exact tokens.

    ``prompt_token_ids`` is the whole prompt of that turn as the server tokenised
    it; ``completion_token_ids``/``completion_logprobs`` are what it generated.
    Trainers rebuild the token stream from these instead of re-rendering the chat.
    ``tool_errors`` names the tool calls of this turn whose result told the model
    of an error (an unknown tool, bad arguments, a ``ToolError``): the one typed
    record of tool errors, which reward helpers and the inspector read.
    """

    index: int
    started_at: float
    model_seconds: float
    tool_seconds: float = 0.0
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    completion_logprobs: tuple[float, ...] | None = None
    tool_errors: tuple[str, ...] = ()
    policy_version: int | None = None
    """The trainer's policy version that generated this turn (training only)."""
    sequence: int = 0
    """Which token sequence of the rollout this turn continues. The engine's loop has one
    (0); an agent program whose calls do not extend one another (a sub-agent, a summarised
    history) has several, and a trainer assembles each on its own, never re-rendered."""
    rewards: Mapping[str, float] | None = None
    """The reward components the env gave this turn's reply (``EnvResponse.rewards``);
    ``None`` where it gave none (no ``env_response`` hook, or a turn it did not score)."""
    env_seconds: float = 0.0
    """Seconds the env's ``env_response`` took after this turn (0.0 where it answered ``None``)."""
    env_messages: int = 0
    """How many messages the env appended after this turn (after its tool results): the
    observation the model reads next, the last ``env_messages`` messages of the turn."""
    env_info: str | None = None
    """The env's verdict on this turn for people (``EnvResponse.info``), bounded."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnRecord:
        """The inverse of its stored JSON form (lists for tuples, a dict for ``usage``).

        Fields a record does not have are skipped, and those it lacks take their
        defaults, so turns stored by an older or newer benchmax still read."""
        values = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        usage = data.get("usage") or {}
        values["usage"] = Usage(**{name: usage[name] for name in Usage.__dataclass_fields__ if name in usage})
        for name in ("prompt_token_ids", "completion_token_ids", "completion_logprobs"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        values["tool_errors"] = tuple(values.get("tool_errors") or ())
        if values.get("rewards") is not None:
            values["rewards"] = dict(values["rewards"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A stdlib log record emitted while a rollout (or its group hook) ran.

    ``turn`` and ``phase`` place the record in the transcript: ``phase`` is one of
    ``context``, ``model``, ``tools``, ``env`` (``env_response``), ``reward``, ``group_reward``.
    """

    time: float
    level: str
    logger: str
    message: str
    file: str
    line: int
    turn: int
    phase: str
    traceback: str | None = None


def turn_rewards_total(turns: Any) -> float:
    """The sum of every component of every turn's reward: what a turn-scored env usually folds into its outcome."""
    return sum(sum((turn.rewards or {}).values()) for turn in turns)


def total_usage(turns: Any) -> Usage:
    total = Usage()
    for turn in turns:
        total = total + turn.usage
    return total


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
