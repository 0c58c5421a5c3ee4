"""The root of every error benchmax raises on purpose.

Each face catches :class:`BenchmaxError` once and prints its message: these
errors say what went wrong and what to do, so no traceback is needed. Anything
else that escapes is a bug, and keeps its traceback.
"""

from __future__ import annotations


class BenchmaxError(Exception):
    """An error whose message tells the user what to change."""


__all__ = ["BenchmaxError"]
