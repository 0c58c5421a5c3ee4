"""A served env's splits, read in pages: the listing a remote run streams its dataset from.

Each split (and ``max_examples``) is opened once, as a local run opens it
(:func:`benchmax.loading.open_examples`: every example checked as it is read), and
read on from where the last page stopped; a page from elsewhere reads from the
start again. Reading runs in a worker thread, one page at a time per split: a
dataset may read files.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmax.envs import DatasetSplit, Environment, Example
from benchmax.loading import ExampleStream, open_examples


class _Cursor:
    """One pass over a split's stream, and how far it has read."""

    def __init__(self, stream: ExampleStream) -> None:
        self.stream = stream
        self.iterator: Iterator[Example[Any]] = iter(stream)
        self.position = 0

    def read(self, offset: int, limit: int) -> tuple[list[Example[Any]], bool]:
        """Up to ``limit`` examples from ``offset``, and whether the split goes on after them."""
        if offset < self.position:
            self.iterator, self.position = iter(self.stream), 0
        while self.position < offset:
            if next(self.iterator, None) is None:
                return [], False
            self.position += 1
        page = list(itertools.islice(self.iterator, limit + 1))
        more = len(page) > limit
        if more:  # the one read ahead opens the next page
            self.iterator = itertools.chain(page[limit:], self.iterator)
            page = page[:limit]
        self.position += len(page)
        return page, more


class SplitPages:
    """The pages of every split a client asked for."""

    def __init__(self, env: Environment[Any, Any], base_dir: Path) -> None:
        self.env = env
        self.base_dir = base_dir
        self._cursors: dict[tuple[str, int | None], _Cursor] = {}
        self._locks: dict[tuple[str, int | None], asyncio.Lock] = {}

    async def page(
        self, split: DatasetSplit, offset: int, limit: int, max_examples: int | None = None
    ) -> tuple[list[Example[Any]], bool]:
        key = (split, max_examples)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cursor = self._cursors.get(key)
            if cursor is None:
                stream = await open_examples(self.env, split, self.base_dir, max_examples=max_examples)
                cursor = self._cursors[key] = _Cursor(stream)
            try:
                return await asyncio.to_thread(cursor.read, offset, limit)
            except BaseException:
                self._cursors.pop(key, None)  # a failed read leaves the stream mid-way: open it again
                raise

    async def find(
        self, split: DatasetSplit, *, index: int | None = None, example_id: str | None = None
    ) -> Example[Any]:
        """One example by position or id (``LookupError`` when the split has none such)."""
        if index is not None:
            found, _ = await self.page(split, index, 1)
            if not found:
                raise LookupError(f"the {split} split has no example at index {index}")
            return found[0]
        offset = 0
        while True:
            found, more = await self.page(split, offset, 256)
            for example in found:
                if example.id == example_id:
                    return example
            if not more:
                raise LookupError(f"the {split} split has no example with id {example_id!r}")
            offset += len(found)
