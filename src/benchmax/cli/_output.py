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
    When even that does not fit, columns that fold (``overflow="fold"``) wrap
    down to their longest word, and then the elastic column is left out.
    """
    options = console.options
    _, right, _, left = Padding.unpack(table.padding)

    def overhead() -> int:
        count = len(table.columns)
        return count * (left + right) + (count + 1 if table.box else 0) - (0 if table.show_edge else 2)

    widths: dict[int, int] = {}
    target = None
    for column in table.columns:
        if column.header == elastic:
            target = column
            continue
        cells = [column.header, *column.cells]
        width = max(Measurement.get(console, options, cell).maximum for cell in cells)
        if column.max_width is not None:
            width = min(width, column.max_width)
        widths[id(column)] = width
    room = console.width - overhead() - (min_elastic if target is not None else 0)
    excess = sum(widths.values()) - room
    for column in table.columns:
        if excess <= 0:
            break
        if column is target or column.overflow != "fold":
            continue
        cells = [column.header, *column.cells]
        floor = max(Measurement.get(console, options, cell).minimum for cell in cells)
        give = min(excess, widths[id(column)] - floor)
        if give > 0:
            widths[id(column)] -= give
            excess -= give
    if excess > 0 and target is not None:
        table.columns.remove(target)  # the prompt gives way whole rather than cut the figures
        table.caption = f"{elastic} left out: the terminal is {console.width} columns wide"
        table.caption_justify = "left"
        target = None
    fixed = 0
    for column in table.columns:
        if column is not target:
            column.width = widths[id(column)]
            fixed += column.width
    if target is not None:
        target.width = max(min_elastic, console.width - overhead() - fixed)
        target.no_wrap, target.overflow, target.ratio = True, "ellipsis", None
    table.expand = False
    return table
