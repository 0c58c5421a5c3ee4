"""The one writer of a run directory.

Groups arrive from the event loop and are committed by a background thread in
batched transactions, so SQLite never blocks rollouts in flight. A group and all
its rollouts land in one transaction: after a crash the store holds whole groups
only, and resume reruns whatever is missing.

The queue between the two is bounded (``max_queued_rollouts``): when the disk or
another process holding the database lock slows the thread down, producers wait
(:meth:`RunWriter.awrite_group` without blocking the event loop) instead of
piling finished rollouts up in memory. The driver's memory is then bounded by
what is in flight plus that queue, however long the run.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import Example, LogEntry, RolloutOutcome, TerminationReason, completion_text, is_scored
from benchmax.errors import BenchmaxError
from benchmax.store import _codec, _compat, _figures, _schema
from benchmax.store._batch import SQL_PARAMETERS, chunks

logger = logging.getLogger("benchmax.store")

_LEVELS = {"CRITICAL": 50, "ERROR": 40, "WARNING": 30, "INFO": 20, "DEBUG": 10}
_CHUNK = 1000
MAX_QUEUED_ROLLOUTS = 4096
"""Default bound of the writer's queue, in rollouts (a few MB of transcripts)."""
_COMMIT_ROLLOUTS = 2048
_COMMIT_SECONDS = 0.02


class StoreError(BenchmaxError, RuntimeError):
    """The run directory cannot be used as asked (exists already, missing, other run)."""


@dataclass(frozen=True, slots=True)
class RolloutCost:
    """What one rollout's model calls cost: ``usd`` ``None`` is unknown (a model without a price).

    ``requests`` went to a model server, ``cache_hits`` were answered by the
    response cache; ``calls`` are the figures per role and model (JSON objects).
    """

    usd: float | None
    requests: int = 0
    cache_hits: int = 0
    calls: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupWrite:
    """One settled group, ready to store; ``costs`` (when given) has one entry per outcome."""

    group_id: str
    example_id: str
    example_idx: int
    batch: int
    outcomes: tuple[RolloutOutcome, ...]
    sample_indices: tuple[int, ...]
    logs: tuple[LogEntry, ...] = ()
    step: int | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    costs: tuple[RolloutCost | None, ...] = ()

    def __post_init__(self) -> None:
        if self.costs and len(self.costs) != len(self.outcomes):
            raise ValueError(f"group {self.group_id}: {len(self.costs)} costs for {len(self.outcomes)} outcomes")


@dataclass(frozen=True, slots=True)
class RolloutScore:
    """A stored rollout scored again: what changed, keyed by its ``seq`` in the source run."""

    seq: int
    termination_reason: str
    error: str | None
    rewards: Mapping[str, float]
    logs: tuple[LogEntry, ...] = ()
    scoring_error: str | None = None
    """Why a scoring hook failed (see :attr:`benchmax.envs.RolloutOutcome.scoring_error`)."""

    def __reduce__(self) -> tuple[Any, ...]:
        # a rescore's workers send these by the thousand; the default pickling of a
        # slotted dataclass walks its fields in Python on both sides
        return (
            RolloutScore,
            (self.seq, self.termination_reason, self.error, self.rewards, self.logs, self.scoring_error),
        )


@dataclass(frozen=True, slots=True)
class ScoredGroup:
    """A source group scored again; everything else is copied from the source run."""

    group_id: str
    scores: tuple[RolloutScore, ...]
    logs: tuple[LogEntry, ...] = ()
    started_at: float = 0.0
    ended_at: float = 0.0

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScoredGroup, (self.group_id, self.scores, self.logs, self.started_at, self.ended_at))


dumps = _codec.dumps


class RunWriter:
    """Creates or resumes one run directory and writes its groups, examples and metadata."""

    def __init__(
        self, run_dir: Path, conn: sqlite3.Connection, *, max_queued_rollouts: int = MAX_QUEUED_ROLLOUTS
    ) -> None:
        self.run_dir = run_dir
        self._conn = conn
        self._lock = threading.Lock()
        self._queue: queue.Queue[GroupWrite | ScoredGroup | _Barrier | None] = queue.Queue()
        self._source: str | None = None
        self._indexes_deferred = False
        self._rows_written = False
        self._room = threading.Condition()
        self._queued = 0
        self._limit = max(1, max_queued_rollouts)
        self._error: BaseException | None = None
        self._seq = conn.execute("SELECT COALESCE(MAX(seq), -1) FROM rollouts").fetchone()[0] + 1
        self._threshold = _threshold(self._meta_value("pass_threshold"))
        self._thread = threading.Thread(target=self._drain, name="benchmax-store-writer", daemon=True)
        self._thread.start()

    @staticmethod
    def check_new(run_dir: str | Path) -> None:
        """Raise :class:`StoreError` when ``run_dir`` already holds a run (checked before any work starts)."""
        path = Path(run_dir)
        if (path / _schema.DB_NAME).exists():
            raise StoreError(f"{path} already holds a run; continue it with --resume {path} or pick another --run-dir")

    @classmethod
    def create(cls, run_dir: str | Path, meta: Mapping[str, Any], **options: Any) -> RunWriter:
        """A new run in ``run_dir`` (created if needed; must not hold a run already)."""
        path = Path(run_dir)
        db = path / _schema.DB_NAME
        cls.check_new(path)
        path.mkdir(parents=True, exist_ok=True)
        # Built under another name and renamed into place, so a kill mid-creation never
        # leaves a run.sqlite without its meta (which neither --resume nor a rerun could use).
        draft = path / f".{_schema.DB_NAME}.creating"
        for leftover in (draft, Path(f"{draft}-wal"), Path(f"{draft}-shm")):
            leftover.unlink(missing_ok=True)
        conn = _schema.connect(draft)
        _schema.create(conn)
        with _transaction(conn, threading.Lock()):
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)", [(key, dumps(value)) for key, value in meta.items()]
            )
        conn.close()
        draft.replace(db)
        return cls(path, _schema.connect(db), **options)

    @classmethod
    def resume(cls, run_dir: str | Path, **options: Any) -> RunWriter:
        """The writer of an existing run; a run of an older store layout is upgraded first."""
        path = Path(run_dir)
        db = path / _schema.DB_NAME
        if not db.exists():
            raise StoreError(f"{path} holds no run to resume ({_schema.DB_NAME} not found)")
        conn = _schema.connect(db)
        found = _schema.check_readable(conn, db)
        if found == 1:
            logger.warning("upgrading %s to the current store layout (once; this can take a while)", db)
            _compat.upgrade_v1(conn)
        _schema.create(conn)
        return cls(path, conn, **options)

    # -- metadata and examples ------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def _meta_value(self, key: str) -> Any:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return orjson.loads(rows[0][0]) if rows else None

    def meta(self) -> dict[str, Any]:
        rows = self._read("SELECT key, value FROM meta")
        return {key: orjson.loads(value) for key, value in rows if key != "schema_version"}

    def set_meta(self, **values: Any) -> None:
        self._check()
        if "pass_threshold" in values and _threshold(values["pass_threshold"]) != self._threshold:
            self.flush()
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(key, dumps(value)) for key, value in values.items()],
            )
            if "pass_threshold" in values and _threshold(values["pass_threshold"]) != self._threshold:
                self._threshold = _threshold(values["pass_threshold"])
                self._conn.execute(
                    "UPDATE example_figures SET passed = (SELECT COUNT(*) FROM groups AS g JOIN rollouts AS r"
                    " ON r.seq BETWEEN g.first_seq AND g.last_seq"
                    " WHERE g.example_id = example_figures.example_id AND COALESCE(r.reward, 0) >= ?)",
                    (self._threshold,),
                )

    def set_closing_meta(self, **values: Any) -> None:
        """:meth:`set_meta` that works after a failed write too: a run that stopped on a store
        error says so (its status never stays ``running``). Raises ``sqlite3.Error`` when even
        that cannot be written."""
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(key, dumps(value)) for key, value in values.items()],
            )

    def write_step(self, step: int, metrics: Mapping[str, Any], *, at: float | None = None) -> None:
        """Keep one training step's metrics (a step written again replaces its row)."""
        self._check()
        with _transaction(self._conn, self._lock):
            self._conn.execute(
                "INSERT INTO steps (step, time, metrics) VALUES (?, ?, ?) "
                "ON CONFLICT (step) DO UPDATE SET time = excluded.time, metrics = excluded.metrics",
                (int(step), time.time() if at is None else float(at), dumps(dict(metrics))),
            )

    def add_examples(self, split: str, examples: Iterable[Example]) -> int:
        """Store examples not stored yet (matched by id), in dataset order; returns how many were new."""
        added = 0
        for chunk in chunks(enumerate(examples), _CHUNK):
            with _transaction(self._conn, self._lock):
                before = self._conn.total_changes
                self._conn.executemany(
                    "INSERT OR IGNORE INTO examples (example_id, idx, split, payload) VALUES (?, ?, ?, ?)",
                    [(example.id, index, split, dumps(dict(example.payload))) for index, example in chunk],
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
            self.set_meta(dataset_size=count)  # repeats are stored once: the length tells a dropped repeat
        elif resume and (firsts != stored or self.meta().get("dataset_size", count) != count):
            raise StoreError(
                f"the dataset changed since this run started: {self.meta().get('dataset_size', stored)} examples "
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
            self._read(
                "SELECT idx, example_id FROM examples WHERE idx BETWEEN ? AND ?", (chunk[0][0], chunk[-1][0])
            )
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
                    f"the dataset changed since this run started: first difference at index {index} (example "
                    f"{example.id[:16]}… is not the stored one there; {stored} distinct examples stored); "
                    "resume needs the same data"
                )
        if matched != expected:
            raise StoreError(
                f"the dataset changed since this run started: first difference among indexes {first}.."
                f"{located[-1][0]} (an example stored there is missing); resume needs the same data"
            )

    def _store_chunk(self, split: str, chunk: list[tuple[int, Example]]) -> None:
        rows = [(example.id, index, split, dumps(dict(example.payload))) for index, example in chunk]
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT OR IGNORE INTO examples (example_id, idx, split, payload) VALUES (?, ?, ?, ?)", rows
            )

    def example_ids(self) -> list[str]:
        return [row[0] for row in self._read("SELECT example_id FROM examples ORDER BY idx")]

    def completed_groups(self) -> set[str]:
        """Every stored group id (the whole run in memory: prefer :meth:`completed_in`)."""
        return {row[0] for row in self._read("SELECT group_id FROM groups")}

    def completed_in(self, first_idx: int, last_idx: int) -> set[str]:
        """The stored groups of the examples at dataset positions ``first_idx..last_idx`` (an index range)."""
        rows = self._read("SELECT group_id FROM groups WHERE example_idx BETWEEN ? AND ?", (first_idx, last_idx))
        return {row[0] for row in rows}

    # -- groups ----------------------------------------------------------------------

    @property
    def queued_rollouts(self) -> int:
        """Rollouts handed over and not committed yet."""
        return self._queued

    def write_group(self, group: GroupWrite) -> None:
        """Queue a group for the next transaction.

        Returns at once while the queue has room; when the writer lags by more than
        ``max_queued_rollouts``, blocks until it catches up (async callers: use
        :meth:`awrite_group`, which waits without blocking the event loop).
        """
        self._check()
        self._wait_for_room(len(group.outcomes))
        with self._room:
            self._queued += len(group.outcomes)
        self._queue.put(group)

    async def awrite_group(self, group: GroupWrite) -> None:
        """Queue a group, first waiting (asynchronously) while the queue is full."""
        self._check()
        if not self._has_room(len(group.outcomes)):
            await asyncio.to_thread(self._wait_for_room, len(group.outcomes))
        self.write_group(group)

    def _has_room(self, size: int) -> bool:
        return self._queued == 0 or self._queued + size <= self._limit

    def _wait_for_room(self, size: int) -> None:
        with self._room:
            while not self._has_room(size) and self._error is None and self._thread.is_alive():
                self._room.wait(0.5)
        self._check()

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued so far is committed."""
        barrier = _Barrier()
        self._queue.put(barrier)
        if not barrier.done.wait(timeout):
            raise StoreError("the store writer did not flush in time")
        self._check()

    async def aflush(self) -> None:
        await asyncio.to_thread(self.flush)

    # -- a run derived from another (rescoring) -------------------------------------------

    def adopt(self, source: str | Path) -> int:
        """Make this (new, empty) run a copy of ``source``'s examples and transcripts.

        Rescoring changes rewards, never transcripts: the compressed transcripts and
        their search index are copied as stored, under the same ``seq`` numbers, and
        each group is then written with :meth:`write_scores`. Returns the number of
        rollouts adopted.
        """
        db = _schema.locate(source)
        self.flush()
        with self._lock:
            if self._conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]:
                raise StoreError(f"{self.run_dir} holds rollouts already; a rescored run starts empty")
            self._conn.execute("ATTACH DATABASE ? AS src", (f"{db.resolve().as_uri()}?mode=ro",))
            self._indexes_deferred = _schema.defer_rollout_indexes(self._conn)
            self._rows_written = True
        layout = self._source_layout()
        if layout > _schema.SCHEMA_VERSION:
            raise _schema.SchemaError(f"{db} was written by a newer benchmax; upgrade benchmax to rescore it")
        with _transaction(self._conn, self._lock):
            self._conn.execute("INSERT INTO examples SELECT example_id, idx, split, payload FROM src.examples")
            if layout >= 2:
                self._conn.execute("INSERT INTO transcripts SELECT * FROM src.transcripts")
                for table in ("rollouts_fts_data", "rollouts_fts_idx"):
                    self._conn.execute(f"DELETE FROM {table}")
                    self._conn.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
            else:
                _compat.copy_v1_transcripts(self._conn, "src")
            count = self._conn.execute("SELECT COUNT(*) FROM transcripts").fetchone()[0]
        self._source = "src"
        self._seq = count and self._conn.execute("SELECT MAX(seq) FROM transcripts").fetchone()[0] + 1
        return count

    def _source_layout(self) -> int:
        row = self._conn.execute("SELECT value FROM src.meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 1

    def write_scores(self, groups: Sequence[ScoredGroup]) -> None:
        """Queue groups of an adopted run with their new scores (blocks while the queue is full)."""
        if self._source is None:
            raise StoreError("write_scores needs a run that adopted its source first (RunWriter.adopt)")
        self._check()
        size = sum(len(group.scores) for group in groups)
        self._wait_for_room(size)
        with self._room:
            self._queued += size
        for group in groups:
            self._queue.put(group)

    # -- batches ----------------------------------------------------------------------

    def fill_batch(self, batch: int) -> None:
        """Apply the batch zero-fill: a component any rollout of the batch emitted is
        filled with 0.0 (``filled = 1``) on every rollout of the batch that lacks it.

        A batch already filled with nothing written to it since is left alone, so a
        resumed run refills only the batches that changed.
        """
        self.flush()
        with _transaction(self._conn, self._lock):
            state = self._conn.execute(
                "SELECT rollouts, filled_rollouts FROM batches WHERE batch = ?", (batch,)
            ).fetchone()
            if state is None or state[0] == state[1]:
                return
            if self._conn.execute("SELECT 1 FROM batch_components WHERE batch = ? LIMIT 1", (batch,)).fetchone():
                changes = self._conn.total_changes
                self._conn.execute(
                    """
                    INSERT OR IGNORE INTO rewards (seq, component, value, filled)
                    SELECT r.seq, c.component, 0.0, 1
                    FROM groups AS g
                    JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq
                    JOIN batch_components AS c ON c.batch = g.batch
                    WHERE g.batch = ?
                    """,
                    (batch,),
                )
                self._conn.execute(
                    "UPDATE rollouts SET reward = 0.0 WHERE seq IN (SELECT r.seq FROM groups AS g"
                    " JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq"
                    " WHERE g.batch = ? AND r.reward IS NULL)",
                    (batch,),
                )
                if self._conn.total_changes != changes:  # else the written figures already count every value
                    self._rows_written = True
                    _recount_examples(self._conn, "SELECT DISTINCT example_id FROM groups WHERE batch = ?", (batch,))
            self._conn.execute("UPDATE batches SET filled_rollouts = rollouts WHERE batch = ?", (batch,))

    def batches(self) -> list[int]:
        """The batches of every group written so far (queued groups included)."""
        self.flush()
        return [row[0] for row in self._read("SELECT batch FROM batches ORDER BY batch")]

    def unfilled_batches(self) -> list[int]:
        """The batches written to since their last zero-fill (queued groups included)."""
        self.flush()
        return [
            row[0]
            for row in self._read(
                "SELECT batch FROM batches WHERE filled_rollouts IS NULL OR filled_rollouts != rollouts ORDER BY batch"
            )
        ]

    def close(self) -> None:
        """Commit what is queued, keep the whole-run figures in the file, and close."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._indexes_deferred:
            with self._lock:
                _schema.ensure_rollout_indexes(self._conn)
            self._indexes_deferred = False
        if self._error is None:
            try:
                with _transaction(self._conn, self._lock):
                    _figures.keep(self._conn)
                if self._rows_written:
                    # the readers' query planner statistics, for the tables as they are now (sampled,
                    # yet a third of a second at a million rollouts: skipped when no row changed)
                    self._conn.execute("PRAGMA analysis_limit=1000")
                    self._conn.execute("ANALYZE main")  # not an attached source run (read-only)
            except sqlite3.Error:
                logger.exception("keeping the run's figures failed; readers compute them instead")
        self._conn.close()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise StoreError(f"writing the run store failed: {self._error}") from self._error

    # -- the writer thread -------------------------------------------------------------

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            pending: list[GroupWrite | ScoredGroup] = []
            barriers: list[_Barrier] = []
            stop = False
            size = 0
            deadline = time.monotonic() + _COMMIT_SECONDS
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, _Barrier):
                    barriers.append(item)
                else:
                    pending.append(item)
                    size += len(item.outcomes) if isinstance(item, GroupWrite) else len(item.scores)
                if stop or size >= _COMMIT_ROLLOUTS:
                    break
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            if pending and self._error is None:
                try:
                    self._commit(pending)
                except Exception as exc:
                    try:
                        self._commit_apart(pending, exc)
                    except BaseException as fatal:
                        logger.exception("run store write failed")
                        self._error = fatal
                except BaseException as exc:
                    logger.exception("run store write failed")
                    self._error = exc
            with self._room:
                self._queued -= size
                self._room.notify_all()
            for barrier in barriers:
                barrier.done.set()
            if stop:
                return

    def _commit(self, items: Sequence[GroupWrite | ScoredGroup]) -> None:
        self._rows_written = True
        scored = [item for item in items if isinstance(item, ScoredGroup)]
        groups = [item for item in items if isinstance(item, GroupWrite)]
        if scored:
            with _transaction(self._conn, self._lock):
                _write_scores(self._conn, scored, self._threshold)
        if not groups:
            return
        with _transaction(self._conn, self._lock):
            self._replace_existing([group.group_id for group in groups])
            for scrubbed in (False, True):
                rows = _Rows(scrubbed=scrubbed)
                seq = self._seq
                for group in groups:
                    seq = rows.add(group, seq, self._threshold)
                self._conn.execute("SAVEPOINT group_rows")
                try:
                    self._insert(rows)
                except UnicodeEncodeError:
                    # A lone surrogate in an error, log line or reward name; retry with them escaped.
                    self._conn.execute("ROLLBACK TO group_rows")
                    self._conn.execute("RELEASE group_rows")
                    if scrubbed:
                        raise
                    continue
                self._conn.execute("RELEASE group_rows")
                self._seq = seq
                return

    def _commit_apart(self, items: Sequence[GroupWrite | ScoredGroup], error: Exception) -> None:
        """Commit ``items`` one by one after their shared transaction failed with ``error``.

        One group holding a value the store cannot keep must not cost the groups
        committed with it: each is written alone, and a group that still fails for
        its own contents (:func:`_group_fault`) is stored as failed rollouts that
        say why. An error of the database itself (locked, full, damaged), or one
        that even those stand-ins meet, raises: the writer stops.
        """
        if not _group_fault(error) or any(isinstance(item, ScoredGroup) for item in items):
            raise error  # a rescore's scores may be committed already, apart from its groups: never twice
        for item in items:
            try:
                self._commit([item])
            except Exception as exc:
                if not isinstance(item, GroupWrite) or not _group_fault(exc):
                    raise
                logger.error(
                    "group %s could not be stored as it came (%s: %s); its rollouts are stored as failed",
                    item.group_id,
                    type(exc).__name__,
                    exc,
                )
                self._commit([_stand_in(item, exc)])

    def _replace_existing(self, group_ids: Sequence[str]) -> None:
        """Remove groups about to be written again, so the new write replaces them whole."""
        marks = ",".join("?" * len(group_ids))
        for group_seq, group_id in self._conn.execute(
            f"SELECT group_seq, group_id FROM groups WHERE group_id IN ({marks})", tuple(group_ids)
        ).fetchall():
            _delete_group(self._conn, group_seq, group_id, self._threshold)

    def _insert(self, rows: _Rows) -> None:
        conn = self._conn
        conn.executemany(
            "INSERT INTO groups (group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs,"
            " first_seq, last_seq, failed, reward_sum, reward_sq, low, high, prompt_tokens, completion_tokens,"
            " turns, tool_calls, seconds, first_started_at, last_ended_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.groups,
        )
        try:
            conn.executemany(
                "INSERT INTO rollouts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows.rollouts,
            )
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"a rollout id of these groups is stored already in another group ({exc})") from exc
        conn.executemany("INSERT INTO transcripts VALUES (?, ?, ?, ?)", rows.transcripts)
        conn.executemany("INSERT INTO rewards VALUES (?, ?, ?, 0)", rows.rewards)
        conn.executemany("INSERT INTO rollout_costs VALUES (?, ?, ?, ?, ?)", rows.costs)
        conn.executemany(
            "INSERT INTO rollouts_fts (rowid, answer, error, transcript, ids) VALUES (?, ?, ?, ?, ?)", rows.search
        )
        conn.executemany(
            "INSERT INTO example_figures (example_id, idx, rollouts, failed, passed, reward_sum, groups)"
            " VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (example_id) DO UPDATE SET"
            " rollouts = rollouts + excluded.rollouts, failed = failed + excluded.failed,"
            " passed = passed + excluded.passed, reward_sum = reward_sum + excluded.reward_sum, groups = groups + 1",
            rows.examples,
        )
        conn.executemany(
            "INSERT INTO batches (batch, rollouts) VALUES (?, ?)"
            " ON CONFLICT (batch) DO UPDATE SET rollouts = rollouts + excluded.rollouts",
            rows.batches,
        )
        conn.executemany("INSERT OR IGNORE INTO batch_components VALUES (?, ?)", rows.components)
        conn.executemany(_COMPONENT_UPSERT, rows.example_components)
        conn.executemany(
            "INSERT INTO logs (rollout_id, group_id, time, level, levelno, logger, message, "
            "file, line, turn, phase, traceback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.logs,
        )


class _Rows:
    """The table rows of the groups of one transaction."""

    def __init__(self, *, scrubbed: bool = False) -> None:
        self.scrubbed = scrubbed
        self.groups: list[tuple[Any, ...]] = []
        self.rollouts: list[tuple[Any, ...]] = []
        self.transcripts: list[tuple[Any, ...]] = []
        self.rewards: list[tuple[Any, ...]] = []
        self.search: list[tuple[Any, ...]] = []
        self.examples: list[tuple[Any, ...]] = []
        self.batches: list[tuple[Any, ...]] = []
        self.components: list[tuple[Any, ...]] = []
        self.example_components: list[tuple[Any, ...]] = []
        self.logs: list[tuple[Any, ...]] = []
        self.costs: list[tuple[Any, ...]] = []

    def _text(self, value: Any) -> Any:
        return _codec.scrub(value) if self.scrubbed and isinstance(value, str) else value

    def add(self, group: GroupWrite, seq: int, threshold: float) -> int:
        """Add one group's rows, its rollouts numbered from ``seq``; returns the next free number."""
        first = seq
        totals: list[float] = []
        failed = prompt = completion = turns = tool_calls = 0
        seconds = 0.0
        components: set[str] = set()
        sums: dict[str, list[float]] = {}
        for entry in group.logs:
            self.logs.append(self._log(None, group.group_id, entry))
        costs = group.costs or (None,) * len(group.outcomes)
        for sample, outcome, cost in zip(group.sample_indices, group.outcomes, costs, strict=True):
            if cost is not None:
                self.costs.append(
                    (seq, cost.usd, cost.requests, cost.cache_hits, self._text(dumps([dict(c) for c in cost.calls])))
                )
            rewards = {self._text(str(name)): float(value) for name, value in outcome.rewards.items()}
            scored = is_scored(outcome.termination_reason, rewards, outcome.scoring_error)
            total = sum(rewards.values()) if rewards else None
            usage = outcome.usage
            calls = sum(turn.tool_calls for turn in outcome.turns)
            final_text = self._text(completion_text(outcome.messages))
            error = self._text(outcome.error)
            rollout_id = self._text(outcome.rollout_id)
            self.rollouts.append(
                (
                    seq,
                    rollout_id,
                    self._text(group.group_id),
                    self._text(group.example_id),
                    sample,
                    group.step,
                    group.batch,
                    outcome.split,
                    self._text(outcome.termination_reason),
                    error,
                    int(scored),
                    total,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    len(outcome.turns),
                    calls,
                    outcome.started_at,
                    outcome.ended_at,
                    outcome.seconds,
                    final_text,
                )
            )
            self.transcripts.append(
                (
                    seq,
                    _codec.pack(outcome.messages),
                    _codec.pack(outcome.turns),  # orjson writes the slotted dataclasses as asdict() would
                    _codec.pack(asdict(outcome.sampling)) if outcome.sampling is not None else None,
                )
            )
            self.search.append(
                (
                    seq,
                    final_text,
                    error or "",
                    self._text(_codec.search_text(outcome.messages)),
                    f"{rollout_id} {self._text(group.example_id)}",
                )
            )
            for name, value in rewards.items():
                self.rewards.append((seq, name, value))
                components.add(name)
                total_count = sums.setdefault(name, [0.0, 0])
                total_count[0] += value
                total_count[1] += 1
            for entry in outcome.logs:
                self.logs.append(self._log(rollout_id, group.group_id, entry))
            totals.append(total if total is not None else 0.0)
            failed += not scored
            prompt += usage.prompt_tokens
            completion += usage.completion_tokens
            turns += len(outcome.turns)
            tool_calls += calls
            seconds += outcome.seconds
            seq += 1
        size = len(group.outcomes)
        passed = sum(total >= threshold for total in totals)
        self.groups.append(
            (
                self._text(group.group_id),
                self._text(group.example_id),
                group.example_idx,
                group.batch,
                group.step,
                size,
                group.started_at,
                group.ended_at,
                self._text(dumps([asdict(entry) for entry in group.logs])) if group.logs else None,
                first,
                seq - 1,
                failed,
                sum(totals),
                sum(total * total for total in totals),
                min(totals, default=None),
                max(totals, default=None),
                prompt,
                completion,
                turns,
                tool_calls,
                seconds,
                min((outcome.started_at for outcome in group.outcomes), default=None),
                max((outcome.ended_at for outcome in group.outcomes), default=None),
            )
        )
        self.examples.append((self._text(group.example_id), group.example_idx, size, failed, passed, sum(totals)))
        self.batches.append((group.batch, size))
        self.components.extend((group.batch, name) for name in components)
        example = self._text(group.example_id)
        self.example_components.extend((example, name, total, count) for name, (total, count) in sums.items())
        return seq

    def _log(self, rollout_id: str | None, group_id: str, entry: LogEntry) -> tuple[Any, ...]:
        return (
            rollout_id,
            self._text(group_id),
            entry.time,
            self._text(entry.level),
            _LEVELS.get(entry.level, 0),
            self._text(entry.logger),
            self._text(entry.message),
            self._text(entry.file),
            entry.line,
            entry.turn,
            self._text(entry.phase),
            self._text(entry.traceback),
        )


def _write_scores(conn: sqlite3.Connection, groups: Sequence[ScoredGroup], threshold: float) -> None:
    """Rows of rescored groups: the source's rollouts with their new scores, the new figures."""
    rollouts, rewards, logs, group_rows, examples, batches, components = [], [], [], [], [], [], []
    example_components: list[tuple[Any, ...]] = []
    for group in groups:
        source = conn.execute(
            "SELECT example_id, example_idx, batch, step, size FROM src.groups WHERE group_id = ?", (group.group_id,)
        ).fetchone()
        if source is None:
            raise StoreError(f"no group {group.group_id!r} in the source run")
        example_id, example_idx, batch, step, size = source
        totals: list[float] = []
        failed = 0
        names: set[str] = set()
        sums: dict[str, list[float]] = {}
        for score in group.scores:
            values = {str(name): float(value) for name, value in score.rewards.items()}
            for name, value in values.items():
                total_count = sums.setdefault(name, [0.0, 0])
                total_count[0] += value
                total_count[1] += 1
            ok = is_scored(score.termination_reason, values, score.scoring_error)
            total = sum(values.values()) if values else None
            rollouts.append((score.termination_reason, score.error, int(ok), total, score.seq))
            rewards.extend((score.seq, name, value) for name, value in values.items())
            names.update(values)
            totals.append(total if total is not None else 0.0)
            failed += not ok
        seqs = [score.seq for score in group.scores]
        if max(seqs) - min(seqs) + 1 != len(seqs):
            raise StoreError(
                f"group {group.group_id!r} of the source run is not stored in one piece; "
                "resume the source run once (benchmax eval --resume) to upgrade it, then rescore"
            )
        group_rows.append((group, example_id, example_idx, batch, step, size, min(seqs), max(seqs), failed, totals))
        examples.append(
            (example_id, example_idx, len(totals), failed, sum(t >= threshold for t in totals), sum(totals))
        )
        batches.append((batch, len(totals)))
        components.extend((batch, name) for name in names)
        example_components.extend((example_id, name, total, count) for name, (total, count) in sums.items())
        for entry in group.logs:
            logs.append(_log_row(None, group.group_id, entry))
        if any(score.logs for score in group.scores):
            ids = dict(
                conn.execute(
                    f"SELECT seq, rollout_id FROM src.rollouts WHERE seq IN ({','.join('?' * len(seqs))})", seqs
                ).fetchall()
            )
            for score in group.scores:
                logs.extend(_log_row(ids.get(score.seq), group.group_id, entry) for entry in score.logs)
    conn.executemany(
        "INSERT INTO rollouts SELECT r.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step, r.batch,"
        " r.split, ?, ?, ?, ?, r.prompt_tokens, r.completion_tokens, r.num_turns, r.num_tool_calls, r.started_at,"
        " r.ended_at, r.seconds, r.final_text FROM src.rollouts AS r WHERE r.seq = ?",
        rollouts,
    )
    conn.executemany("INSERT INTO rewards VALUES (?, ?, ?, 0)", rewards)
    # the group's token and time figures are its (unchanged) rollouts', summed in the same statement
    conn.executemany(
        "INSERT INTO groups (group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs,"
        " first_seq, last_seq, failed, reward_sum, reward_sq, low, high, prompt_tokens, completion_tokens,"
        " turns, tool_calls, seconds, first_started_at, last_ended_at)"
        " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(SUM(prompt_tokens), 0),"
        " COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(num_turns), 0), COALESCE(SUM(num_tool_calls), 0),"
        " COALESCE(SUM(seconds), 0.0), MIN(started_at), MAX(ended_at) FROM rollouts WHERE seq BETWEEN ? AND ?",
        [
            (
                group.group_id, example_id, example_idx, batch, step, size, group.started_at, group.ended_at,
                dumps([asdict(entry) for entry in group.logs]) if group.logs else None, first, last, failed,
                sum(totals), sum(t * t for t in totals), min(totals, default=None), max(totals, default=None),
                first, last,
            )
            for group, example_id, example_idx, batch, step, size, first, last, failed, totals in group_rows
        ],
    )  # fmt: skip
    _upsert_figures(conn, examples, batches, components)
    conn.executemany(_COMPONENT_UPSERT, example_components)
    conn.executemany(_LOG_INSERT, logs)


def _upsert_figures(conn: sqlite3.Connection, examples: list[Any], batches: list[Any], components: list[Any]) -> None:
    conn.executemany(
        "INSERT INTO example_figures (example_id, idx, rollouts, failed, passed, reward_sum, groups)"
        " VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (example_id) DO UPDATE SET"
        " rollouts = rollouts + excluded.rollouts, failed = failed + excluded.failed,"
        " passed = passed + excluded.passed, reward_sum = reward_sum + excluded.reward_sum, groups = groups + 1",
        examples,
    )
    conn.executemany(
        "INSERT INTO batches (batch, rollouts) VALUES (?, ?)"
        " ON CONFLICT (batch) DO UPDATE SET rollouts = rollouts + excluded.rollouts",
        batches,
    )
    conn.executemany("INSERT OR IGNORE INTO batch_components VALUES (?, ?)", components)


_COMPONENT_UPSERT = (
    "INSERT INTO example_components (example_id, component, value_sum, count) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (example_id, component) DO UPDATE SET value_sum = value_sum + excluded.value_sum,"
    " count = count + excluded.count"
)


def _recount_examples(conn: sqlite3.Connection, examples: str, params: tuple[Any, ...]) -> None:
    """Recompute ``example_components`` of the examples ``examples`` selects (after a fill or a removal)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS recount (example_id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.recount")
    conn.execute(f"INSERT OR IGNORE INTO temp.recount {examples}", params)
    conn.execute("DELETE FROM example_components WHERE example_id IN (SELECT example_id FROM temp.recount)")
    conn.execute(
        "INSERT INTO example_components SELECT g.example_id, w.component, SUM(w.value), COUNT(*)"
        " FROM temp.recount AS x JOIN groups AS g ON g.example_id = x.example_id"
        " JOIN rewards AS w ON w.seq BETWEEN g.first_seq AND g.last_seq GROUP BY g.example_id, w.component"
    )


_LOG_INSERT = (
    "INSERT INTO logs (rollout_id, group_id, time, level, levelno, logger, message, "
    "file, line, turn, phase, traceback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _log_row(rollout_id: str | None, group_id: str, entry: LogEntry) -> tuple[Any, ...]:
    return (
        rollout_id, group_id, entry.time, entry.level, _LEVELS.get(entry.level, 0), entry.logger, entry.message,
        entry.file, entry.line, entry.turn, entry.phase, entry.traceback,
    )  # fmt: skip


def _delete_group(conn: sqlite3.Connection, group_seq: int, group_id: str, threshold: float) -> None:
    """Take a stored group out of every table and figure (it is about to be written again)."""
    group = conn.execute(
        "SELECT example_id, batch, size, first_seq, last_seq, failed, reward_sum FROM groups WHERE group_seq = ?",
        (group_seq,),
    ).fetchone()
    example_id, batch, size, first, last, failed, reward_sum = group
    passed = conn.execute(
        "SELECT COUNT(*) FROM rollouts WHERE seq BETWEEN ? AND ? AND COALESCE(reward, 0) >= ?", (first, last, threshold)
    ).fetchone()[0]
    for seq, final_text, error, rollout_id, messages in conn.execute(
        "SELECT r.seq, r.final_text, r.error, r.rollout_id, t.messages FROM rollouts AS r"
        " JOIN transcripts AS t ON t.seq = r.seq WHERE r.seq BETWEEN ? AND ?",
        (first, last),
    ).fetchall():
        conn.execute(
            "INSERT INTO rollouts_fts (rollouts_fts, rowid, answer, error, transcript, ids)"
            " VALUES ('delete', ?, ?, ?, ?, ?)",
            (
                seq,
                final_text,
                error or "",
                _codec.search_text(_codec.decode(messages) or []),
                f"{rollout_id} {example_id}",
            ),
        )
    for table in ("rollouts", "transcripts", "rewards", "rollout_costs"):
        conn.execute(f"DELETE FROM {table} WHERE seq BETWEEN ? AND ?", (first, last))
    conn.execute("DELETE FROM logs WHERE group_id = ?", (group_id,))
    conn.execute("DELETE FROM groups WHERE group_seq = ?", (group_seq,))
    conn.execute(
        "UPDATE example_figures SET rollouts = rollouts - ?, failed = failed - ?, passed = passed - ?,"
        " reward_sum = reward_sum - ?, groups = groups - 1 WHERE example_id = ?",
        (size, failed, passed, reward_sum, example_id),
    )
    conn.execute("DELETE FROM example_figures WHERE example_id = ? AND groups <= 0", (example_id,))
    _recount_examples(conn, "SELECT ?", (example_id,))
    conn.execute("UPDATE batches SET rollouts = rollouts - ? WHERE batch = ?", (size, batch))


def _group_fault(error: BaseException) -> bool:
    """Whether ``error`` comes from what a group holds (a number past 64 bits, a value SQLite or
    the codec cannot take), rather than from the database or the process."""
    if isinstance(error, sqlite3.IntegrityError | sqlite3.DataError | sqlite3.InterfaceError):
        return True
    return isinstance(error, Exception) and not isinstance(error, sqlite3.DatabaseError | MemoryError)


_STORE_FAILURE = TerminationReason.HARNESS_ERROR


def _stand_in(group: GroupWrite, error: Exception) -> GroupWrite:
    """``group`` as failed rollouts saying why the store could not keep it: ids, times and
    dataset position kept; transcripts, turns, rewards, logs and costs left out."""
    why = f"{type(error).__name__}: {error}"
    if len(why) > 500:
        why = f"{why[:497]}..."
    reason = (
        f"the run store could not keep this rollout as it came ({why}); "
        "it is stored as failed, without its transcript"
    )
    outcomes = tuple(
        RolloutOutcome(
            rewards={},
            termination_reason=_STORE_FAILURE,
            error=reason,
            rollout_id=str(outcome.rollout_id),
            example_id=str(outcome.example_id),
            split=outcome.split,
            started_at=float(outcome.started_at),
            ended_at=float(outcome.ended_at),
        )
        for outcome in group.outcomes
    )
    return replace(group, outcomes=outcomes, logs=(), costs=())


def _threshold(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1.0


class _Barrier:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` under the writer's lock, rolled back on error.

    The lock matters because the writer thread and the caller's thread share one
    connection, and SQLite transactions on one connection cannot interleave.
    """

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock) -> None:
        self._conn = conn
        self._lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
        finally:
            self._lock.release()
