"""How the CLI prints what a user copies or reads first: commands and errors."""

from __future__ import annotations

import shlex
from os import PathLike

from rich.markup import escape


def command_line(*parts: str | PathLike[str]) -> str:
    """A command as a shell line: every part quoted where the shell needs it (print it unwrapped)."""
    return shlex.join(str(part) for part in parts)


def error_line(message: str) -> str:
    """``error: MESSAGE`` in red, with the message's own brackets kept as text."""
    return f"[red]error:[/] {escape(message)}"
