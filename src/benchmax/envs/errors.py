"""Exceptions env code raises to steer the rollout loop."""

from __future__ import annotations


class ToolError(Exception):
    """Raised by ``run_tool`` when the call failed in a way the model should see.

    The message goes back to the model as the tool result and the rollout goes on,
    so the model can correct itself (a bad path, a failed query).
    """


class RolloutFailure(Exception):
    """Ends the rollout with ``reason`` (any short snake_case word) and no reward.

    Use it for operational failures that say nothing about the model's quality: a
    sandbox that would not start, a judge that returned garbage. The run goes on;
    the rollout is stored with the reason and ``message``.
    """

    def __init__(self, reason: str, message: str = "") -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("RolloutFailure needs a non-empty reason, e.g. 'sandbox_error'")
        super().__init__(message or reason)
        self.reason = reason.strip()
        self.message = message

    def __reduce__(self) -> tuple[type[RolloutFailure], tuple[str, str]]:
        return (type(self), (self.reason, self.message))


class DatasetError(ValueError):
    """A dataset file or row is unusable; the message names ``file:line``."""


class EnvDefinitionError(TypeError):
    """The environment class breaks the contract (no scoring hook, bad limits, bad tool)."""
