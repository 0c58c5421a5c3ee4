"""How the CLI prints what a user copies or reads first: commands and errors."""

from __future__ import annotations

import shlex
from os import PathLike

from rich.markup import escape


def command_line(*parts: str | PathLike[str]) -> str:
    """A command as a shell line: every part quoted where the shell needs it (print it unwrapped)."""
    return shlex.join(str(part) for part in parts)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 example``, ``2 examples`` (``many`` for nouns whose plural is not ``noun + "s"``)."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def error_line(message: str) -> str:
    """``error: MESSAGE`` in red, with the message's own brackets kept as text."""
    return f"[red]error:[/] {escape(message)}"
