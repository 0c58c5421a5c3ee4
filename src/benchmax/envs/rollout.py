"""Records that cross the boundary between env code, the engine and trainers.

All frozen: a request or outcome is a fact once made, and the runner, store and
trainer may share one without copying.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs.types import DatasetSplit, Example, Messages


@dataclass(frozen=True, slots=True)
class StaticBearerAuth:
    """A fixed API key sent as ``Authorization: Bearer``; never shown in reprs."""

    api_key: str = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.api_key, str):
            raise TypeError("StaticBearerAuth.api_key must be a string")

    @classmethod
    def from_env(cls, variable: str) -> StaticBearerAuth:
        """Read the key from an environment variable, naming it when it is unset."""
        value = os.environ.get(variable)
        if value is None:
            raise ValueError(f"environment variable {variable} is not set; export the API key there")
        return cls(value)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


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
class RolloutRequest:
    """One rollout of one example against one model endpoint."""

    rollout_id: str
    example: Example
    model: str
    base_url: str
    model_auth: StaticBearerAuth | None = field(default=None, repr=False)
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
        if self.split not in ("train", "eval"):
            raise ValueError(f"RolloutRequest.split must be 'train' or 'eval', got {self.split!r}")


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What one model turn cost and, when the server returns them, its exact tokens.

    ``prompt_token_ids`` is the whole prompt of that turn as the server tokenised
    it; ``completion_token_ids``/``completion_logprobs`` are what it generated.
    Trainers rebuild the token stream from these instead of re-rendering the chat.
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


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A stdlib log record emitted while a rollout (or its group hook) ran.

    ``turn`` and ``phase`` place the record in the transcript: ``phase`` is one of
    ``context``, ``model``, ``tools``, ``reward``, ``group_reward``.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRollout:
    """A finished model loop, as the scoring hooks see it.

    ``messages`` is the full transcript (prompt included); ``example_args`` is the
    payload minus ``prompt_messages``.
    """

    rollout_id: str
    messages: Messages
    example_args: Mapping[str, Any]
    split: DatasetSplit
    termination_reason: str
    example_id: str = ""
    turns: Sequence[TurnRecord] = ()
    rewards: Mapping[str, float] | None = None
    error: str | None = None

    @property
    def usage(self) -> Usage:
        total = Usage()
        for turn in self.turns:
            total = total + turn.usage
        return total


@dataclass(frozen=True, slots=True)
class RolloutOutcome:
    """The settled result of one rollout, as trainers and the runner receive it.

    ``rewards`` is empty for operational failures; then ``error`` says why.
    The positional fields match benchmax 0.2.x.
    """

    rewards: Mapping[str, float]
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

    @property
    def usage(self) -> Usage:
        total = Usage()
        for turn in self.turns:
            total = total + turn.usage
        return total

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def scored(self) -> bool:
        return bool(self.rewards)
