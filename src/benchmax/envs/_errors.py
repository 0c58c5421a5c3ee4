"""Exceptions of the contract: what env code raises to steer a rollout, and what a bad env gets."""

from __future__ import annotations

from benchmax.errors import BenchmaxError


class ToolError(Exception):
    """Raised by ``run_tool`` when the call failed in a way the model should see.

    The message goes back to the model as the tool result and the rollout goes on,
    so the model can correct itself (a bad path, a failed query).
    """


class DatasetError(BenchmaxError, ValueError):
    """A dataset file or row is unusable; the message names ``file:line``."""


class DatasetRowTypeError(DatasetError, TypeError):
    """A dataset line is JSON but not an object (a ``TypeError`` too, as in 0.2.x)."""


class DatasetNotFound(DatasetError, FileNotFoundError):
    """The dataset file does not exist (a ``FileNotFoundError`` too, as in 0.2.x)."""


class EnvDefinitionError(BenchmaxError, TypeError, ValueError):
    """The environment class breaks the contract (no scoring hook, bad limits, bad tool).

    A ``TypeError`` and a ``ValueError``: 0.2.x raised ``ValueError`` for bad limits.
    """


class EnvSpecError(BenchmaxError, ValueError):
    """The env spec does not name a loadable environment (file, module, package or directory)."""
