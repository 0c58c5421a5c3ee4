"""What goes wrong with a sandbox itself, as opposed to the program inside it."""

from __future__ import annotations

from benchmax.errors import BenchmaxError


class SandboxError(BenchmaxError, RuntimeError):
    """The sandbox could not do what was asked (start, run, move a file): not the program failing.

    Env and reward code turn this into ``RolloutFailure("sandbox_error", ...)`` so an
    infrastructure fault never scores as a wrong answer.
    """


class SandboxEnded(SandboxError):
    """The sandbox ended under a running request, not by its owner's ``stop``.

    Every process in a sandbox runs as one user, so a command can kill the sandbox's
    supervisor (or break its channel); a program that does so ends its own run.
    :func:`benchmax.sandbox.run_python` reports that as the program killed (exit -9),
    which scores as a failed test; other callers see this error.
    """


class SandboxUnavailable(SandboxError):
    """No sandbox of the asked kind can run on this machine; the message says how to fix that."""
