"""The one writer of a run directory.

Groups arrive from the event loop and are committed by a background thread in
batched transactions, so SQLite never blocks rollouts in flight. A group and all
its rollouts land in one transaction: after a crash the store holds whole groups
only, and resume reruns whatever is missing.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import Example, LogEntry, RolloutOutcome, completion_text
from benchmax.errors import BenchmaxError
from benchmax.store import schema

logger = logging.getLogger("benchmax.store")

_LEVELS = {"CRITICAL": 50, "ERROR": 40, "WARNING": 30, "INFO": 20, "DEBUG": 10}


class StoreError(BenchmaxError, RuntimeError):
    """The run directory cannot be used as asked (exists already, missing, other run)."""


@dataclass(frozen=True, slots=True)
class GroupWrite:
    """One settled group, ready to store."""

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


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
    except orjson.JSONEncodeError:
        # Env output with lone surrogates or nested past orjson's limit: store what can be kept.
        return orjson.dumps(_scrub(value), option=orjson.OPT_NON_STR_KEYS, default=repr).decode()


def _scrub(value: Any, depth: int = 0) -> Any:
    """``value`` with strings made valid UTF-8 and nesting cut at 200 levels (the cut is marked)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if depth >= 200:
        return "…[nested too deep to store]"
    if isinstance(value, Mapping):
        return {_scrub(str(key)): _scrub(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(item, depth + 1) for item in value]
    if is_dataclass(value) and not isinstance(value, type):
        return _scrub(asdict(value), depth + 1)
    if value is None or isinstance(value, bool | int | float):
        return value
    try:
        return _scrub(str(value))
    except Exception:
        return f"<unprintable {type(value).__name__}>"


class RunWriter:
    def __init__(self, run_dir: Path, conn: sqlite3.Connection) -> None:
        self.run_dir = run_dir
        self._conn = conn
        self._lock = threading.Lock()
        self._queue: queue.Queue[GroupWrite | _Barrier | None] = queue.Queue()
        self._error: BaseException | None = None
        self._seq = (conn.execute("SELECT COALESCE(MAX(seq), -1) FROM rollouts").fetchone()[0]) + 1
        self._thread = threading.Thread(target=self._drain, name="benchmax-store-writer", daemon=True)
        self._thread.start()

    @staticmethod
    def check_new(run_dir: str | Path) -> None:
        """Raise :class:`StoreError` when ``run_dir`` already holds a run."""
        path = Path(run_dir)
        if (path / schema.DB_NAME).exists():
            raise StoreError(
                f"{path} already holds a run; continue it with --resume {path} or pick another --run-dir"
            )

    @classmethod
    def create(cls, run_dir: str | Path, meta: Mapping[str, Any]) -> RunWriter:
        """A new run in ``run_dir`` (created if needed; must not hold a run already)."""
        path = Path(run_dir)
        db = path / schema.DB_NAME
        cls.check_new(path)
        path.mkdir(parents=True, exist_ok=True)
        # Built under another name and renamed into place, so a kill mid-creation never
        # leaves a run.sqlite without its meta (which neither --resume nor a rerun could use).
        draft = path / f".{schema.DB_NAME}.creating"
        for leftover in (draft, Path(f"{draft}-wal"), Path(f"{draft}-shm")):
            leftover.unlink(missing_ok=True)
        conn = schema.connect(draft)
        schema.create(conn)
        with _transaction(conn, threading.Lock()):
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)", [(key, dumps(value)) for key, value in meta.items()]
            )
        conn.close()
        draft.replace(db)
        return cls(path, schema.connect(db))

    @classmethod
    def resume(cls, run_dir: str | Path) -> RunWriter:
        path = Path(run_dir)
        db = path / schema.DB_NAME
        if not db.exists():
            raise StoreError(f"{path} holds no run to resume ({schema.DB_NAME} not found)")
        conn = schema.connect(db)
        schema.create(conn)
        return cls(path, conn)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def meta(self) -> dict[str, Any]:
        rows = self._read("SELECT key, value FROM meta")
        return {key: orjson.loads(value) for key, value in rows if key != "schema_version"}

    def set_meta(self, **values: Any) -> None:
        self._check()
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
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

    def add_examples(self, split: str, examples: Iterable[Example]) -> None:
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT OR IGNORE INTO examples (example_id, idx, split, payload) VALUES (?, ?, ?, ?)",
                [
                    (example.id, index, split, dumps(dict(example.payload)))
                    for index, example in enumerate(examples)
                ],
            )

    def example_ids(self) -> list[str]:
        return [row[0] for row in self._read("SELECT example_id FROM examples ORDER BY idx")]

    def completed_groups(self) -> set[str]:
        return {row[0] for row in self._read("SELECT group_id FROM groups")}

    def write_group(self, group: GroupWrite) -> None:
        """Queue a group for the next transaction; returns at once."""
        self._check()
        self._queue.put(group)

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued so far is committed."""
        barrier = _Barrier()
        self._queue.put(barrier)
        if not barrier.done.wait(timeout):
            raise StoreError("the store writer did not flush in time")
        self._check()

    async def aflush(self) -> None:
        await asyncio.to_thread(self.flush)

    def fill_batch(self, batch: int) -> None:
        """Apply the batch zero-fill: a component any rollout of the batch emitted is
        filled with 0.0 (``filled = 1``) on every rollout of the batch that lacks it."""
        self.flush()
        with _transaction(self._conn, self._lock):
            self._conn.execute(
                """
                INSERT OR IGNORE INTO rewards (rollout_id, component, value, filled)
                SELECT r.rollout_id, c.component, 0.0, 1
                FROM rollouts AS r
                JOIN (
                    SELECT DISTINCT w.component FROM rewards AS w
                    JOIN rollouts AS r2 ON r2.rollout_id = w.rollout_id
                    WHERE r2.batch = ? AND w.filled = 0
                ) AS c
                WHERE r.batch = ?
                """,
                (batch, batch),
            )
            self._conn.execute(
                """
                UPDATE rollouts SET reward = (
                    SELECT SUM(value) FROM rewards WHERE rewards.rollout_id = rollouts.rollout_id
                ) WHERE batch = ?
                """,
                (batch,),
            )

    def batches(self) -> list[int]:
        """The batches of every group written so far (queued groups included)."""
        self.flush()
        return [row[0] for row in self._read("SELECT DISTINCT batch FROM rollouts ORDER BY batch")]

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._conn.close()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise StoreError(f"writing the run store failed: {self._error}") from self._error

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            pending: list[GroupWrite] = []
            barriers: list[_Barrier] = []
            stop = False
            deadline = time.monotonic() + 0.02
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, _Barrier):
                    barriers.append(item)
                else:
                    pending.append(item)
                if stop or len(pending) >= 256:
                    break
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            if pending and self._error is None:
                try:
                    self._commit(pending)
                except BaseException as exc:
                    logger.exception("run store write failed")
                    self._error = exc
            for barrier in barriers:
                barrier.done.set()
            if stop:
                return

    def _commit(self, groups: Sequence[GroupWrite]) -> None:
        group_rows = []
        rollout_rows = []
        reward_rows = []
        log_rows = []
        for group in groups:
            group_rows.append(
                (
                    group.group_id,
                    group.example_id,
                    group.example_idx,
                    group.batch,
                    group.step,
                    len(group.outcomes),
                    group.started_at,
                    group.ended_at,
                    dumps([asdict(entry) for entry in group.logs]) if group.logs else None,
                )
            )
            for entry in group.logs:
                log_rows.append(_log_row(None, group.group_id, entry))
            for sample, outcome in zip(group.sample_indices, group.outcomes, strict=True):
                usage = outcome.usage
                rewards = dict(outcome.rewards)
                rollout_rows.append(
                    (
                        outcome.rollout_id,
                        self._seq,
                        group.group_id,
                        group.example_id,
                        sample,
                        group.step,
                        group.batch,
                        outcome.split,
                        outcome.termination_reason,
                        outcome.error,
                        int(outcome.scored),
                        sum(rewards.values()) if rewards else None,
                        usage.prompt_tokens,
                        usage.completion_tokens,
                        len(outcome.turns),
                        sum(turn.tool_calls for turn in outcome.turns),
                        outcome.started_at,
                        outcome.ended_at,
                        outcome.seconds,
                        completion_text(outcome.messages),
                        dumps(outcome.messages),
                        dumps(outcome.turns),  # same JSON as asdict(), 9x faster
                        dumps(asdict(outcome.sampling)) if outcome.sampling is not None else None,
                    )
                )
                self._seq += 1
                for component, value in rewards.items():
                    reward_rows.append((outcome.rollout_id, component, value, 0))
                for entry in outcome.logs:
                    log_rows.append(_log_row(outcome.rollout_id, group.group_id, entry))
        try:
            self._insert(group_rows, rollout_rows, reward_rows, log_rows)
        except UnicodeEncodeError:
            # A lone surrogate in an error, log line or reward name; retry with them escaped.
            tables = (group_rows, rollout_rows, reward_rows, log_rows)
            self._insert(*([tuple(_scrub(list(row))) for row in rows] for rows in tables))

    def _insert(self, groups: list[Any], rollouts: list[Any], rewards: list[Any], logs: list[Any]) -> None:
        with _transaction(self._conn, self._lock):
            self._conn.executemany(
                "INSERT OR REPLACE INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", groups
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO rollouts VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rollouts,
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO rewards VALUES (?, ?, ?, ?)", rewards
            )
            self._conn.executemany(
                "INSERT INTO logs (rollout_id, group_id, time, level, levelno, logger, message, "
                "file, line, turn, phase, traceback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                logs,
            )


def _log_row(rollout_id: str | None, group_id: str, entry: LogEntry) -> tuple[Any, ...]:
    return (
        rollout_id,
        group_id,
        entry.time,
        entry.level,
        _LEVELS.get(entry.level, 0),
        entry.logger,
        entry.message,
        entry.file,
        entry.line,
        entry.turn,
        entry.phase,
        entry.traceback,
    )


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
