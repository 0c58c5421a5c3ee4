"""The read side's connections and caches, shared by the run-level, table and item queries.

Each thread gets its own read-only connection (the inspector may watch a run the
runner is still writing); answers are cached until the run changes.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import orjson

from benchmax.store import _compat, _schema
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._excerpt import prompt_excerpts
from benchmax.store._ids import short_ids
from benchmax.store._meta import RunMeta, labelled
from benchmax.store._query_spec import Page

_CACHED_PAGES = 256


class QueryBase:
    """One run's ``run.sqlite`` opened for reading: a connection per thread, the caches, shared lookups."""

    def __init__(self, path: str | Path) -> None:
        db = _schema.locate(path)
        self.path = db.parent
        self.db = db
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self._pages: collections.OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Page]] = collections.OrderedDict()
        self.layout = _schema.SCHEMA_VERSION
        self._conn()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn, self.layout = _compat.connect_reader(self.db, mapped=True)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @property
    def searchable(self) -> bool:
        """Whether text search uses the full-text index (version-1 files fall back to substring search)."""
        return self.layout >= 2

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _env_label(self) -> str | None:
        """The env of a rollout whose example names none: the run's own (a run of one env)."""
        values = {}
        for key, value in self._all("SELECT key, value FROM meta WHERE key IN ('env_class', 'config')"):
            try:
                values[key] = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
        return RunMeta.from_json(values).env_label

    def _label_envs(self, records: Iterable[dict[str, Any]]) -> None:
        """Name each record's env: its example's, else the run's (:meth:`_env_label`)."""
        records = list(records)
        if any(record.get("env") is None for record in records):
            label = self._env_label()
            for record in records:
                record["env"] = labelled(record.get("env"), label)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn().execute(sql, tuple(params)).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        # fetchall, not fetchone: a statement left unfinished keeps its read
        # transaction open, and the page would never see the writer's new rows
        rows = self._all(sql, params)
        return rows[0] if rows else None

    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._one(sql, params)
        return row[0] if row else None

    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        stamp = self.stamp()
        hit = self._cache.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = compute()
        self._cache[name] = (stamp, value)
        return value

    def stamp(self) -> tuple[Any, ...]:
        """Changes whenever the writer adds rollouts, fills a batch or updates the metadata (cheap)."""
        if self.layout < 2:
            return (
                self._scalar("SELECT MAX(seq) FROM main.rollouts"),
                self._scalar("SELECT COUNT(*) FROM main.rewards"),
                tuple(self._all("SELECT key, value FROM meta ORDER BY key")),
            )
        return (
            self._scalar("SELECT MAX(seq) FROM rollouts"),
            tuple(self._all("SELECT batch, rollouts, filled_rollouts FROM batches ORDER BY batch")),
            tuple(self._all("SELECT key, value FROM meta ORDER BY key")),
        )

    def _page(self, key: tuple[Any, ...], compute: Callable[[], Page]) -> Page:
        """A page, computed once per state of the run (pages are re-asked by a polling browser)."""
        stamp = self.stamp()
        with self._lock:
            hit = self._pages.get(key)
            if hit is not None and hit[0] == stamp:
                self._pages.move_to_end(key)
                return hit[1]
        page = compute()
        with self._lock:
            self._pages[key] = (stamp, page)
            while len(self._pages) > _CACHED_PAGES:
                self._pages.popitem(last=False)
        return page

    def short_ids(self, example_ids: Iterable[str], *, among: Sequence[QueryBase] = ()) -> dict[str, str]:
        """``{full id: short id}`` (:func:`benchmax.store.short_ids`): rows carry both, the page shows the short one."""
        return short_ids([self._conn(), *(other._conn() for other in among)], example_ids)

    def _add_short_ids(self, records: Sequence[dict[str, Any]]) -> None:
        short = self.short_ids([record["example_id"] for record in records])
        for record in records:
            record["short_id"] = short[record["example_id"]]

    def _rewards_by_seq(self, seqs: Sequence[int]) -> dict[int, dict[str, dict[str, Any]]]:
        result: dict[int, dict[str, dict[str, Any]]] = {}
        for chunk in chunks(seqs, SQL_PARAMETERS):
            marks = ",".join("?" * len(chunk))
            for seq, component, value, filled in self._all(
                f"SELECT seq, component, value, filled FROM rewards WHERE seq IN ({marks}) ORDER BY seq, component",
                chunk,
            ):
                result.setdefault(seq, {})[component] = {"value": value, "filled": bool(filled)}
        return result

    def _prompts(self, example_ids: Sequence[str]) -> dict[str, str]:
        """Each example's prompt excerpt (see :func:`benchmax.store._excerpt.prompt_excerpt`)."""
        return prompt_excerpts(self._conn(), example_ids)

    def _db(self) -> sqlite3.Connection:
        return self._conn()
