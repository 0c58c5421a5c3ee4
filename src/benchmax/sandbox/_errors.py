"""What goes wrong with a sandbox itself, as opposed to the program inside it."""

from __future__ import annotations

from benchmax.errors import BenchmaxError


class SandboxError(BenchmaxError, RuntimeError):
    """The sandbox could not do what was asked (start, run, move a file): not the program failing.

    Env and reward code turn this into ``RolloutFailure("sandbox_error", ...)`` so an
    infrastructure fault never scores as a wrong answer.
    """


class SandboxUnavailable(SandboxError):
    """No sandbox of the asked kind can run on this machine; the message says how to fix that."""
