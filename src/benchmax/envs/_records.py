"""What one rollout cost and recorded: sampling, turns, token usage, log records.

Frozen: a record is a fact once made, and the runner, store and trainer may
share one without copying.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
