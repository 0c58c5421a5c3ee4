"""How the CLI prints what a user copies or reads first: commands and errors."""

from __future__ import annotations

import shlex
from os import PathLike

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table


def command_line(*parts: str | PathLike[str]) -> str:
    """A command as a shell line: every part quoted where the shell needs it (print it unwrapped)."""
    return shlex.join(str(part) for part in parts)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 example``, ``2 examples`` (``many`` for nouns whose plural is not ``noun + "s"``)."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def error_line(message: str) -> str:
    """``error: MESSAGE`` in red, with the message's own brackets kept as text."""
    return f"[red]error:[/] {escape(message)}"


def fit_table(console: Console, table: Table, elastic: str, *, min_elastic: int = 8) -> Table:
    """Give every column of ``table`` its content's width and the ``elastic`` one what is left.

    Rich shares a narrow terminal out by ratios, so an id or a number gets cut
    to ``ab…`` while a prompt keeps sixty columns. Here ids and figures are
    never cut: they are what the table is read for; only the elastic column
    (a prompt, say) is shortened, with an ellipsis, down to ``min_elastic``.
    """
    options = console.options
    count = len(table.columns)
    _, right, _, left = Padding.unpack(table.padding)
    overhead = count * (left + right) + (count + 1 if table.box else 0) - (0 if table.show_edge else 2)
    fixed = 0
    target = None
    for column in table.columns:
        if column.header == elastic:
            target = column
            continue
        cells = [column.header, *column.cells]
        width = max(Measurement.get(console, options, cell).maximum for cell in cells)
        if column.max_width is not None:
            width = min(width, column.max_width)
        column.width = width
        fixed += width
    if target is not None:
        target.width = max(min_elastic, console.width - overhead - fixed)
        target.no_wrap, target.overflow, target.ratio = True, "ellipsis", None
    table.expand = False
    return table
