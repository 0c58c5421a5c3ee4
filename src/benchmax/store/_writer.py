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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.store import _codec, _compat, _kept, _schema
from benchmax.store._db import _threshold, _transaction
from benchmax.store._examples import ExampleSync
from benchmax.store._meta import RunMeta, meta_values
from benchmax.store._rescored import _write_scores
from benchmax.store._rows import _delete_group, _group_fault, _recount_examples, _Rows, _stand_in, insert_rows
from benchmax.store._writes import GroupWrite, ScoredGroup, StoreError

logger = logging.getLogger("benchmax.store")

MAX_QUEUED_ROLLOUTS = 4096
"""Default bound of the writer's queue, in rollouts (a few MB of transcripts)."""
_COMMIT_ROLLOUTS = 2048
_COMMIT_SECONDS = 0.02


dumps = _codec.dumps


class RunWriter(ExampleSync):
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
    def create(cls, run_dir: str | Path, meta: RunMeta | Mapping[str, Any], **options: Any) -> RunWriter:
        """A new run in ``run_dir`` (created if needed; must not hold a run already)."""
        if isinstance(meta, RunMeta):
            meta = meta.to_json()
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
        """The meta table as a plain dict (for users' code; benchmax reads :meth:`run_meta`)."""
        rows = self._read("SELECT key, value FROM meta")
        return {key: orjson.loads(value) for key, value in rows if key != "schema_version"}

    def run_meta(self) -> RunMeta:
        """The run's metadata as its typed record."""
        return RunMeta.from_json(self.meta())

    def update_meta(self, **changes: Any) -> None:
        """Record :class:`RunMeta` fields (by name, typed values; ``None`` clears one)."""
        self.set_meta(**meta_values(changes))

    def set_meta(self, **values: Any) -> None:
        """Store meta keys as JSON values as given (users' own keys too; benchmax writes :meth:`update_meta`)."""
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

    def set_closing_meta(self, **changes: Any) -> None:
        """:meth:`update_meta` that works after a failed write too: a run that stopped on a store
        error says so (its status never stays ``running``). Raises ``sqlite3.Error`` when even
        that cannot be written."""
        values = meta_values(changes)
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

    def write_sampler_state(self, step: int, state: Mapping[str, Any], *, at: float | None = None) -> None:
        """Keep a curriculum's state after training step ``step`` was generated (replaces a rewrite)."""
        self._check()
        with _transaction(self._conn, self._lock):
            self._conn.execute(
                "INSERT INTO sampler_states (step, time, state) VALUES (?, ?, ?) "
                "ON CONFLICT (step) DO UPDATE SET time = excluded.time, state = excluded.state",
                (int(step), time.time() if at is None else float(at), dumps(dict(state))),
            )

    def sampler_state(self, *, before: int) -> tuple[int, dict[str, Any]] | None:
        """The latest curriculum state kept for a step before ``before``, with its step."""
        row = self._conn.execute(
            "SELECT step, state FROM sampler_states WHERE step < ? ORDER BY step DESC LIMIT 1", (int(before),)
        ).fetchone()
        return None if row is None else (int(row[0]), orjson.loads(row[1]))

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
            env = "env" if _schema.has_example_env(self._conn, "src") else "NULL"
            self._conn.execute(
                f"INSERT INTO examples (example_id, idx, split, payload, env) SELECT example_id, idx, split, payload,"
                f" {env} FROM src.examples"
            )
            if layout >= 2:
                self._conn.execute("INSERT INTO transcripts SELECT * FROM src.transcripts")
                for table in ("rollouts_fts_data", "rollouts_fts_idx"):
                    self._conn.execute(f"DELETE FROM {table}")
                    self._conn.execute(f"INSERT INTO {table} SELECT * FROM src.{table}")
                if self._conn.execute(
                    "SELECT 1 FROM src.sqlite_master WHERE type = 'table' AND name = 'turn_rewards'"
                ).fetchone():  # the env's turn rewards belong to the transcripts: a rescore keeps them
                    self._conn.execute("INSERT INTO turn_rewards SELECT * FROM src.turn_rewards")
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

        In a run of several envs the fill stays inside an env: a component is filled only
        into the rollouts of an env whose own rollouts emitted it in this batch (filling a
        math env's ``exact`` into a code env's rollouts would score them on a test they
        never took). A batch already filled with nothing written to it since is left
        alone, so a resumed run refills only the batches that changed. The trainer applies
        the same rule to its batch in memory (``benchmax.train`` ``zero_fill``), before the
        batch is stored.
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
                if self._conn.execute(_BATCH_HAS_ENVS, (batch,)).fetchone():
                    self._conn.execute(_FILL_PER_ENV, (batch, batch))
                else:
                    self._conn.execute(_FILL_ONE_ENV, (batch,))
                self._conn.execute(
                    "UPDATE rollouts SET reward = 0.0 WHERE seq IN (SELECT r.seq FROM groups AS g"
                    " JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq WHERE g.batch = ?"
                    " AND r.reward IS NULL AND EXISTS (SELECT 1 FROM rewards AS w WHERE w.seq = r.seq))",
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
                    _kept.keep(self._conn)
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
                    insert_rows(self._conn, rows)
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


_FILL_ONE_ENV = """
INSERT OR IGNORE INTO rewards (seq, component, value, filled)
SELECT r.seq, c.component, 0.0, 1
FROM groups AS g
JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq
JOIN batch_components AS c ON c.batch = g.batch
WHERE g.batch = ?
"""
"""The fill of a batch of one env: every component the batch emitted, on every rollout of it."""

_BATCH_HAS_ENVS = (
    "SELECT 1 FROM groups AS g JOIN examples AS e ON e.example_id = g.example_id"
    " WHERE g.batch = ? AND e.env IS NOT NULL LIMIT 1"
)

_FILL_PER_ENV = """
WITH batch_rollouts AS (
    SELECT r.seq AS seq, e.env AS env
    FROM groups AS g
    JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq
    LEFT JOIN examples AS e ON e.example_id = g.example_id
    WHERE g.batch = ?
),
emitted AS (
    SELECT DISTINCT b.env AS env, w.component AS component
    FROM batch_rollouts AS b JOIN rewards AS w ON w.seq = b.seq
    WHERE w.filled = 0 AND w.component IN (SELECT component FROM batch_components WHERE batch = ?)
)
INSERT OR IGNORE INTO rewards (seq, component, value, filled)
SELECT b.seq, c.component, 0.0, 1
FROM batch_rollouts AS b JOIN emitted AS c ON c.env IS b.env
"""
"""The fill of a batch of several envs: each env's rollouts get the components its own rollouts
emitted (raw, ``filled = 0``) in the batch, and no other env's."""


class _Barrier:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()
