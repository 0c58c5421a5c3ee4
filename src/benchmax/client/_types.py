"""What a model client returns and raises, and the protocol every client implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from benchmax.auth import ModelAuth
from benchmax.envs import TerminationReason, Usage
from benchmax.errors import BenchmaxError


class ModelError(BenchmaxError):
    """A model request that failed for good; ``reason`` is the rollout's termination reason."""

    def __init__(self, reason: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


class EndpointDown(ModelError):
    """The endpoint stayed down past the outage budget; the requests it held fail with this."""

    def __init__(self, message: str) -> None:
        super().__init__(TerminationReason.MODEL_ERROR, message)


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One parsed assistant turn."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: Usage
    prompt_token_ids: tuple[int, ...] | None = None
    completion_token_ids: tuple[int, ...] | None = None
    completion_logprobs: tuple[float, ...] | None = None
    policy_version: int | None = None
    """Which version of a trainer's policy generated the turn (training policies only)."""
    response_model: str | None = None
    """The model the server says answered (its reply's ``model``), for traces."""


class ModelClient(Protocol):
    """Anything that turns a chat-completions body into one assistant turn.

    The HTTP client is one; the trainer's in-process policy is another.
    ``rollout_id`` lets a stateful client (a token-accumulating policy) keep
    per-rollout state and an auth provider know which request it signs;
    ``auth`` (passed only when the rollout's request carries one) signs the
    request, so a client without credentials need not take it.
    """

    async def chat(
        self, body: dict[str, Any], *, rollout_id: str | None = None, auth: ModelAuth | None = None
    ) -> ChatResult: ...

    async def aclose(self) -> None: ...
