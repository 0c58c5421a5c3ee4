"""A run's dataset in the store: stored once for a new run, checked example by example on resume."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from benchmax.envs import Example
from benchmax.store import _codec
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._db import _transaction
from benchmax.store._meta import RunMeta
from benchmax.store._writes import StoreError

_CHUNK = 1000
dumps = _codec.dumps


class ExampleSync:
    """The dataset half of :class:`~benchmax.store.RunWriter` (which it is mixed into)."""

    run_dir: Any
    _conn: sqlite3.Connection
    _lock: threading.Lock

    if TYPE_CHECKING:

        def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def run_meta(self) -> RunMeta: ...

        def update_meta(self, **changes: Any) -> None: ...

    def add_examples(self, split: str, examples: Iterable[Example], *, start: int = 0) -> int:
        """Store examples not stored yet (matched by id), in dataset order from position ``start``
        (a dataset drawn as it goes, an endless one, adds its examples in pieces); returns how many were new."""
        added = 0
        for chunk in chunks(enumerate(examples, start), _CHUNK):
            with _transaction(self._conn, self._lock):
                before = self._conn.total_changes
                self._conn.executemany(
                    "INSERT OR IGNORE INTO examples (example_id, idx, split, payload, env) VALUES (?, ?, ?, ?, ?)",
                    [(example.id, index, split, dumps(dict(example.payload)), example.env) for index, example in chunk],
                )
                added += self._conn.total_changes - before
        return added

    def sync_examples(self, split: str, examples: Iterable[Example], *, resume: bool) -> int:
        """Store the dataset of a new run, or check that a resumed run's dataset is unchanged.

        Returns the number of examples; see :meth:`synced`.
        """
        return sum(len(chunk) for chunk in self.synced(split, examples, resume=resume))

    def synced(
        self, split: str, examples: Iterable[Example], *, resume: bool
    ) -> Iterator[list[tuple[int, Example, int]]]:
        """``examples`` again in chunks of ``(position, example, first position of its id)``,
        each chunk stored (a new run) or checked against the stored dataset (a resumed
        run) before it is yielded.

        Streams, so a dataset of millions of examples never sits in memory twice and
        a caller can do its own work on each chunk in the same pass. An example may
        repeat (its first position then differs from its own; it is stored once). A
        resumed run's dataset must be the stored one, in the stored order: else
        :class:`StoreError`, raised at the first difference, or at the end when the
        dataset got shorter.
        """
        stored = self._read("SELECT COUNT(*) FROM examples")[0][0]
        count = 0
        firsts = 0
        for chunk in chunks(enumerate(examples), _CHUNK):
            if not stored:
                self._store_chunk(split, chunk)
            located, stored_here = self._locate(chunk)
            if stored and resume:
                self._check_chunk(located, stored, stored_here)
            firsts += sum(1 for index, _, first in located if first == index)
            count += len(chunk)
            yield located
        if not stored:
            self.update_meta(dataset_size=count)  # repeats are stored once: the length tells a dropped repeat
        elif resume and (firsts != stored or (self.run_meta().dataset_size or count) != count):
            raise StoreError(
                f"the dataset changed since this run started: {self.run_meta().dataset_size or stored} examples "
                f"({stored} distinct) stored, {count} ({firsts} distinct) now; resume needs the same data"
            )

    def has_examples(self) -> bool:
        """Whether the run's dataset is stored (a resumed run's, unless it stopped before that)."""
        return bool(self._read("SELECT 1 FROM examples LIMIT 1"))

    def located(self, examples: Iterable[Example]) -> Iterator[list[tuple[int, Example, int]]]:
        """Like :meth:`synced` on a run whose dataset is stored already, without checking it again."""
        for chunk in chunks(enumerate(examples), _CHUNK):
            yield self._locate(chunk)[0]

    def _locate(self, chunk: list[tuple[int, Example]]) -> tuple[list[tuple[int, Example, int]], int]:
        """Each example with the stored position of its first occurrence (-1 when not stored),
        and how many examples are stored at the chunk's positions.

        The stored ids of the chunk's own positions are read first, in one range scan of
        the position index: an example stored where it stands (every one, when the data
        did not change) needs no lookup by id; only repeats and strangers are looked up."""
        at = dict(
            self._read("SELECT idx, example_id FROM examples WHERE idx BETWEEN ? AND ?", (chunk[0][0], chunk[-1][0]))
        )
        located = [(index, example, index if at.get(index) == example.id else -1) for index, example in chunk]
        ids = list({example.id for index, example, first in located if first < 0})
        if not ids:
            return located, len(at)
        found: dict[str, int] = {}
        for part in chunks(ids, SQL_PARAMETERS):
            marks = ",".join("?" * len(part))
            found.update(self._read(f"SELECT example_id, idx FROM examples WHERE example_id IN ({marks})", part))
        return [
            (index, example, first if first >= 0 else found.get(example.id, -1)) for index, example, first in located
        ], len(at)

    def _check_chunk(self, located: list[tuple[int, Example, int]], stored: int, expected: int) -> None:
        """A resumed run's chunk must hold the stored examples at their stored positions
        (``expected`` of them are stored at its positions)."""
        first = located[0][0]
        matched = 0
        for index, example, position in located:
            if position == index:
                matched += 1
            elif position < 0 or position > index:
                raise StoreError(
                    f"the dataset changed since this run started: first difference at index {index}"
                    f"{self._env_at(index)} (example {example.id[:16]}… is not the stored one there; {stored} "
                    "distinct examples stored); "
                    "resume needs the same data"
                )
        if matched != expected:
            raise StoreError(
                f"the dataset changed since this run started: first difference among indexes {first}.."
                f"{located[-1][0]} (an example stored there is missing); resume needs the same data"
            )

    def _env_at(self, index: int) -> str:
        """``, of env NAME`` when the example stored at ``index`` is of a mixture's env: which env's data
        changed is what a user of a mixture fixes (the store's column, not a reading of the id)."""
        found = self._read("SELECT env FROM examples WHERE idx = ?", (index,))
        return f", of env {found[0][0]!r}" if found and found[0][0] is not None else ""

    def _store_chunk(self, split: str, chunk: list[tuple[int, Example]]) -> None:
        rows = [(example.id, index, split, dumps(dict(example.payload)), example.env) for index, example in chunk]
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT OR IGNORE INTO examples (example_id, idx, split, payload, env) VALUES (?, ?, ?, ?, ?)", rows
            )

    def positions(self) -> int | None:
        """How many positions the stored dataset has when each holds its own stored example (no
        repeats: the examples table then names every position); ``None`` otherwise."""
        size = self.run_meta().dataset_size
        if not size:
            return None
        stored = self._read("SELECT COUNT(*), MAX(idx) FROM examples")[0]
        return size if stored == (size, size - 1) else None

    def ids_at(self, first_idx: int, last_idx: int) -> list[str]:
        """The stored example ids at positions ``first_idx..last_idx``, in order (one range scan)."""
        rows = self._read(
            "SELECT example_id FROM examples WHERE idx BETWEEN ? AND ? ORDER BY idx", (first_idx, last_idx)
        )
        return [row[0] for row in rows]

    def example_ids(self) -> list[str]:
        return [row[0] for row in self._read("SELECT example_id FROM examples ORDER BY idx")]

    def completed_groups(self) -> set[str]:
        """Every stored group id (the whole run in memory: prefer :meth:`completed_in`)."""
        return {row[0] for row in self._read("SELECT group_id FROM groups")}

    def completed_in(self, first_idx: int, last_idx: int) -> set[str]:
        """The stored groups of the examples at dataset positions ``first_idx..last_idx`` (an index range)."""
        rows = self._read("SELECT group_id FROM groups WHERE example_idx BETWEEN ? AND ?", (first_idx, last_idx))
        return {row[0] for row in rows}

