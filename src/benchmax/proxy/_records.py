"""What the proxy keeps of one model call: the request as the agent sent it and the reply it got."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs import TurnRecord, Usage


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One chat completion an agent made through its lease, answered or failed.

    The request fields are the agent's own (``model`` as it named one, ``stream``
    as it asked); ``sampling`` holds every other field it sent (temperature,
    max_tokens, response_format...). The reply fields are the model's, as the
    model client parsed them; ``prompt_token_ids``, ``completion_token_ids`` and
    ``completion_logprobs`` are there when the server returned them (the run asks
    for them as the engine does, through the lease's ``sampling``).
    ``error`` says why a call got no reply (the model client's error, masked, or
    the proxy's own deadline) and ``error_reason`` is the termination reason that
    failure means for the rollout.
    """

    index: int
    """The call's place among the lease's calls, in the order they arrived."""
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] | None
    tool_choice: Any
    model: str
    """The model the agent named (the proxy sends every call to the run's model)."""
    stream: bool
    sampling: Mapping[str, Any]
    started_at: float
    """Wall-clock time the call arrived (``time.time()``)."""
    ended_at: float
    model_seconds: float
    """Seconds spent waiting on the model client (retries and outages included)."""
    message: Mapping[str, Any] | None = None
    """The assistant message (``content``, ``tool_calls``...); ``None`` when the call failed."""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    completion_logprobs: tuple[float, ...] | None = None
    policy_version: int | None = None
    error: str | None = None
    error_reason: str | None = None

    @property
    def tool_calls(self) -> tuple[Mapping[str, Any], ...]:
        """The tool calls of the reply (none when it failed or answered in text)."""
        calls = self.message.get("tool_calls") if self.message is not None else None
        return tuple(call for call in calls if isinstance(call, Mapping)) if isinstance(calls, list) else ()

    def as_turn(self, index: int | None = None) -> TurnRecord:
        """The call as the engine records a model turn (tool time is the agent's, so none is counted)."""
        return TurnRecord(
            index=self.index if index is None else index,
            started_at=self.started_at,
            model_seconds=self.model_seconds,
            finish_reason=self.finish_reason,
            usage=self.usage,
            tool_calls=len(self.tool_calls),
            prompt_token_ids=self.prompt_token_ids,
            completion_token_ids=self.completion_token_ids,
            completion_logprobs=self.completion_logprobs,
            policy_version=self.policy_version,
        )
