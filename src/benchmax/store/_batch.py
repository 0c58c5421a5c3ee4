"""Splitting work on a run file into batches: SQLite caps the parameters of one statement, and
a transaction per row would be slow, so every reader and writer of the store goes through here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["SQL_PARAMETERS", "chunks"]

T = TypeVar("T")

SQL_PARAMETERS = 500
"""Values bound in one ``IN (...)`` list: well under SQLite's oldest limit (999)."""


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in consecutive lists of ``size`` (the last may be shorter), read lazily, so a
    stream of rows is never held whole."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, got {size}")
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
