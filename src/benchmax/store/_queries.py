"""Pages and single items of one run, for the inspector.

Every table query returns one page and its total; nothing here loads a whole run
into memory. Whole-run figures come from ``_figures`` (cached here until the run
changes). The connection is read-only: the inspector may watch a run while the
runner is still writing it. Sort keys and filters come from URLs, so they are
mapped onto a fixed set of SQL expressions and bound parameters, never spliced
into SQL text.

What the tables can be filtered and sorted by is declared once, in
:data:`QUERY_SPEC`: the SQL here is built from it, and the inspector's static
export hands the same declaration to the browser, which applies it to the rows
the export carries. A parameter the server understands is one the export
understands, with the same meaning.
"""

from __future__ import annotations

import collections
import math
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import tool_error_ids
from benchmax.store import _codec, _compat, _figures, _schema
from benchmax.store._advantage import group_spread
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._excerpt import example_fields, prompt_excerpt, prompt_excerpts
from benchmax.store._ids import short_ids
from benchmax.store._meta import RunMeta

SNIPPET_CHARS = 240
_CACHED_PAGES = 256
MAX_PAGE = 500
_MAX_RANGES = 200


@dataclass(frozen=True, slots=True)
class Page:
    """One page of rows and the number of rows the filter matched in all."""

    rows: list[dict[str, Any]]
    total: int
    offset: int
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "total": self.total, "offset": self.offset, "limit": self.limit}


@dataclass(frozen=True, slots=True)
class RolloutFilter:
    """What the run page's rollout table may be narrowed by (see :data:`QUERY_SPEC`).

    ``component`` with ``low``/``high`` keeps rollouts whose value of that
    component lies in ``[low, high]``; ``text`` matches words of the final answer,
    the error and the ids (and of the whole transcript with ``in_transcript``):
    each word of ``text`` must start a word there, in any order.
    """

    reasons: tuple[str, ...] = ()
    example_id: str | None = None
    group_id: str | None = None
    component: str | None = None
    low: float | None = None
    high: float | None = None
    text: str | None = None
    in_transcript: bool = False
    failed: bool | None = None
    step: int | None = None
    """A training run's step (the rollouts that step generated)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any], getlist: Callable[[str], list[str]] | None = None) -> RolloutFilter:
        """The filter a URL's query parameters ask for (names as in :data:`QUERY_SPEC`)."""
        reasons = getlist("reason") if getlist else [params.get("reason") or ""]
        return cls(
            reasons=tuple(value for value in reasons if value),
            example_id=params.get("example") or None,
            group_id=params.get("group") or None,
            component=params.get("c") or None,
            low=_number(params.get("cmin"), "cmin"),
            high=_number(params.get("cmax"), "cmax"),
            text=params.get("q") or None,
            in_transcript=params.get("transcript") == "1",
            failed={"1": True, "0": False}.get(params.get("failed") or ""),
            step=_step(params.get("step")),
        )


_ROLLOUT_SORTS = (
    "seq", "rollout_id", "example_id", "group_id", "sample_index", "termination_reason", "reward",
    "prompt_tokens", "completion_tokens", "num_turns", "num_tool_calls", "seconds", "started_at", "final_text",
)  # fmt: skip

# The one declaration of the tables' parameters. Sorts are lists of row fields,
# compared in order; ``null`` values sort last either way; ties end on the tiebreak.
QUERY_SPEC: dict[str, Any] = {
    "rollouts": {
        "default_sort": "seq",
        "tiebreak": "seq",
        "sorts": {name: [name] for name in _ROLLOUT_SORTS},
        "component_sort": "c:",
        "filters": [
            {"param": "reason", "op": "in", "field": "termination_reason"},
            {"param": "example", "op": "eq", "field": "example_id"},
            {"param": "group", "op": "eq", "field": "group_id"},
            {"param": "failed", "op": "flag", "field": "scored", "true_means": False},
            {"param": "step", "op": "number", "field": "step"},
            {"param": "c", "op": "component_range", "low": "cmin", "high": "cmax"},
            {
                "param": "q",
                "op": "words",
                "fields": ["final_text", "error", "rollout_id", "example_id"],
                "transcript_param": "transcript",
            },
        ],
    },
    "examples": {
        "default_sort": "idx",
        "tiebreak": "example_id",
        "sorts": {
            "idx": ["idx"],
            "example_id": ["example_id"],
            "rollouts": ["rollouts"],
            "passed": ["passed"],
            "pass_rate": ["pass_rate"],
            "mean_reward": ["mean_reward"],
            "groups": ["groups"],
            "failed": ["failed"],
        },
        "filters": [{"param": "q", "op": "contains", "fields": ["example_id"]}],
    },
    "groups": {
        "default_sort": "order",
        "tiebreak": "group_id",
        "sorts": {
            "order": ["example_idx", "step", "group_id"],
            "group_id": ["group_id"],
            "example_id": ["example_id"],
            "batch": ["batch"],
            "size": ["size"],
            "mean": ["mean"],
            "std": ["std"],
            "low": ["low"],
            "high": ["high"],
            "failed": ["failed"],
        },
        "filters": [
            {"param": "no_signal", "op": "flag", "field": "no_signal", "true_means": True},
            {"param": "example", "op": "eq", "field": "example_id"},
        ],
    },
}

_ROLLOUT_SQL = {name: f"r.{name}" for name in QUERY_SPEC["rollouts"]["sorts"]}
_EXAMPLE_SQL = {
    "idx": "f.idx",
    "example_id": "f.example_id",
    "rollouts": "f.rollouts",
    "passed": "f.passed",
    "pass_rate": "CAST(f.passed AS REAL) / f.rollouts",
    "mean_reward": "f.reward_sum / f.rollouts",
    "groups": "f.groups",
    "failed": "f.failed",
}
_GROUP_SQL = {
    "example_idx": "example_idx",
    "step": "step",
    "group_id": "group_id",
    "example_id": "example_id",
    "batch": "batch",
    "size": "size",
    "mean": "reward_sum / size",
    "std": "reward_sq / size - (reward_sum / size) * (reward_sum / size)",
    "low": "low",
    "high": "high",
    "failed": "failed",
}
_NULLABLE = {"r.reward", "low", "high"}
_ROW_COLUMNS = (
    "r.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step, r.batch, "
    "r.termination_reason, r.error, r.scored, r.reward, r.prompt_tokens, r.completion_tokens, "
    "r.num_turns, r.num_tool_calls, r.started_at, r.seconds, r.final_text"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class RunQueries:
    """Read-only queries over one run's ``run.sqlite``.

    Each thread gets its own connection: the inspector answers requests from a
    thread pool, and a slow whole-run figure must not hold up a table page.
    Whole-run figures are cached until the run changes (new rollouts, a batch
    zero-fill, a metadata change), so a finished run computes them once.
    """

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

    def __enter__(self) -> RunQueries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    # -- run level ---------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """The meta table as a plain dict, as stored (public, for users' code)."""
        rows = self._all("SELECT key, value FROM meta WHERE key != 'schema_version'")
        return {key: _loads(value) for key, value in rows}

    def run_meta(self) -> RunMeta:
        """The run's metadata as its typed record (what every reader inside benchmax uses)."""
        return RunMeta.from_json(self.meta())

    def _threshold(self) -> float:
        return _figures.stored_threshold(self._conn())

    def progress(self) -> dict[str, Any]:
        """The cheap figures a page polls to notice new rollouts."""
        status = self._scalar("SELECT value FROM meta WHERE key = 'status'")
        if self.layout < 2:
            rollouts = self._scalar("SELECT COUNT(*) FROM main.rollouts") or 0
            filled = self._scalar("SELECT COUNT(*) FROM main.rewards WHERE filled = 1") or 0
        else:
            rollouts, filled = self._one(
                "SELECT COALESCE(SUM(rollouts), 0), COALESCE(SUM(filled_rollouts), 0) FROM batches"
            ) or (0, 0)
        return {
            "rollouts": rollouts,
            "last_seq": self._scalar("SELECT COALESCE(MAX(seq), -1) FROM rollouts"),
            "filled": filled,
            "status": _loads(status) if status else None,
        }

    def short_ids(self, example_ids: Iterable[str], *, among: Sequence[RunQueries] = ()) -> dict[str, str]:
        """``{full id: short id}`` (:func:`benchmax.store.short_ids`): rows carry both, the page shows the short one."""
        return short_ids([self._conn(), *(other._conn() for other in among)], example_ids)

    def _add_short_ids(self, records: Sequence[dict[str, Any]]) -> None:
        short = self.short_ids([record["example_id"] for record in records])
        for record in records:
            record["short_id"] = short[record["example_id"]]

    def components(self) -> list[str]:
        return [row[0] for row in self._all("SELECT DISTINCT component FROM rewards ORDER BY 1")]

    def steps(self) -> list[dict[str, Any]]:
        """A training run's per-step metrics in step order (``[]`` for other runs)."""
        try:
            rows = self._all("SELECT step, time, metrics FROM steps ORDER BY step")
        except sqlite3.OperationalError:  # a store from before the steps table
            return []
        return [{"step": step, "time": at, "metrics": _loads(metrics)} for step, at, metrics in rows]

    def headline(self) -> dict[str, Any]:
        """What the runs list shows for one run: size, mean per component, failure and pass rates."""
        return self._cached("headline", self._headline)

    def _headline(self) -> dict[str, Any]:
        kept = self._kept("overview")
        if kept is not None:
            return {
                **{key: kept[key] for key in ("rollouts", "scored", "failed", "failure_rate", "pass_rate")},
                "pass_threshold": kept["pass_threshold"],
                "components": {name: item["mean"] for name, item in kept["components"].items()},
            }
        return _figures.headline(self._conn())

    def _kept(self, name: str) -> Any | None:
        """Figures the writer kept in the file, while they still describe the run."""
        if self.layout < 2:
            return None
        conn = self._conn()
        with _figures.snapshot(conn):
            return _figures.kept(conn, name, _figures.data_stamp(conn))

    def overview(self, *, bins: int = _figures.DEFAULT_BINS) -> dict[str, Any]:
        """The run page's headline figures (:func:`benchmax.store._figures.overview`)."""

        def compute() -> dict[str, Any]:
            kept = self._kept("overview") if bins == _figures.DEFAULT_BINS else None
            if kept is not None and kept["pass_threshold"] == self._threshold():
                return kept
            return _figures.overview(self._conn(), bins=bins)

        return self._cached(f"overview:{bins}", compute)

    def distributions(self, *, bins: int = _figures.DEFAULT_BINS) -> dict[str, Any]:
        """Latency and token spreads, zero-fills, groups without learning signal."""

        def compute() -> dict[str, Any]:
            kept = self._kept("distributions") if bins == _figures.DEFAULT_BINS else None
            if kept is None:
                return _figures.distributions(self._conn(), self.run_meta(), bins=bins)
            totals = {"first_started_at": kept["first_started_at"], "last_ended_at": kept["last_ended_at"]}
            return {**kept, "wall_seconds": _figures.wall_seconds(self.run_meta(), totals)}

        return self._cached(f"distributions:{bins}", compute)

    def stats(self) -> _figures.RunStats:
        """The same figures as the CLI summary prints."""
        return self._cached("stats", lambda: _figures.run_stats(self._conn(), meta=self.run_meta()))

    # -- tables ------------------------------------------------------------------------

    def rollouts(
        self,
        flt: RolloutFilter | None = None,
        *,
        sort: str = "seq",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
        snippet: int = SNIPPET_CHARS,
    ) -> Page:
        """A page of the rollout table, each row with its reward components.

        The page's ``seq`` numbers are picked first (from an index when the sort
        has one) and only those rows are read, so the last page costs what the first does.
        """
        flt = flt or RolloutFilter()
        offset, limit = _bounds(offset, limit)
        return self._page(("rollouts", flt, sort, descending, offset, limit, snippet), lambda: self._rollouts(
            flt, sort=sort, descending=descending, offset=offset, limit=limit, snippet=snippet
        ))  # fmt: skip

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

    def _rollouts(
        self, flt: RolloutFilter, *, sort: str, descending: bool, offset: int, limit: int, snippet: int
    ) -> Page:
        direction = "DESC" if descending else "ASC"
        with _figures.snapshot(self._conn()):
            text_only = flt == RolloutFilter(text=flt.text, in_transcript=flt.in_transcript) and flt.text
            if text_only and self.searchable and sort == "seq":
                total, seqs = self._searched_page(flt, direction, offset, limit)
            else:
                source, where, params = self._rollout_where(flt)
                total = self._scalar(f"SELECT COUNT(*) FROM {source} {where}", params) or 0
                seqs = self._page_seqs(source, where, params, sort, direction, offset, limit)
            records = self._rows_by_seq(seqs, snippet)
            rewards = self._rewards_by_seq(seqs)
            prompts = self._prompts(sorted({record["example_id"] for record in records}))
            self._add_short_ids(records)
        for record in records:
            record["rewards"] = rewards.get(record["seq"], {})
            record["prompt"] = prompts.get(record["example_id"], "")
        return Page(records, total, offset, limit)

    def _searched_page(self, flt: RolloutFilter, direction: str, offset: int, limit: int) -> tuple[int, list[int]]:
        """A text search in stored order, answered by the index alone."""
        query = match_query(flt.text or "", in_transcript=flt.in_transcript)
        if query is None:
            return 0, []
        total = self._scalar("SELECT COUNT(*) FROM rollouts_fts WHERE rollouts_fts MATCH ?", (query,)) or 0
        rows = self._all(
            f"SELECT rowid FROM rollouts_fts WHERE rollouts_fts MATCH ? ORDER BY rowid {direction} LIMIT ? OFFSET ?",
            (query, limit, offset),
        )
        return total, [row[0] for row in rows]

    def _page_seqs(
        self, source: str, where: str, params: list[Any], sort: str, direction: str, offset: int, limit: int
    ) -> list[int]:
        """The ``seq`` of one page: values in ``direction``, missing values last, ties by ``seq``.

        Rows with a value and rows without are paged apart, each in the order of an
        index (``(value, seq)``), so a sorted page reads about ``offset + limit`` entries.
        """
        prefix = QUERY_SPEC["rollouts"]["component_sort"]
        if sort.startswith(prefix) and len(sort) > len(prefix):
            name = sort[len(prefix) :]
            present = (
                f"SELECT s.seq FROM rewards AS s, {source} WHERE r.seq = s.seq AND s.component = ?"
                f" {where.replace('WHERE', 'AND', 1)}"
            )
            ordered = f"{present} ORDER BY s.value {direction}, s.seq {direction}"
            missing = (
                f"SELECT r.seq FROM {source} {where or 'WHERE 1'} AND NOT EXISTS"
                " (SELECT 1 FROM rewards AS m WHERE m.seq = r.seq AND m.component = ?)"
            )
            return self._two_part_page(
                (ordered, [name, *params]), (present, [name, *params]), (missing, [*params, name]),
                direction, offset, limit,
            )  # fmt: skip
        column = _ROLLOUT_SQL.get(sort, "r.seq")
        if column in _NULLABLE:
            base = where or "WHERE 1"
            present = f"SELECT r.seq FROM {source} {base} AND {column} IS NOT NULL"
            ordered = f"{present} ORDER BY {column} {direction}, r.seq {direction}"
            missing = f"SELECT r.seq FROM {source} {base} AND {column} IS NULL"
            return self._two_part_page(
                (ordered, params), (present, params), (missing, params), direction, offset, limit
            )
        tiebreak = "" if column == "r.seq" else f", r.seq {direction}"
        rows = self._all(
            f"SELECT r.seq FROM {source} {where} ORDER BY {column} {direction}{tiebreak} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [row[0] for row in rows]

    def _two_part_page(
        self,
        ordered: tuple[str, list[Any]],
        present: tuple[str, list[Any]],
        missing: tuple[str, list[Any]],
        direction: str,
        offset: int,
        limit: int,
    ) -> list[int]:
        """A page over the rows with a value (in ``ordered``'s order), then those without (by ``seq``)."""
        sql, params = ordered
        seqs = [row[0] for row in self._all(f"{sql} LIMIT ? OFFSET ?", [*params, limit, offset])]
        if len(seqs) == limit:
            return seqs
        with_value = offset + len(seqs) if seqs else self._scalar(f"SELECT COUNT(*) FROM ({present[0]})", present[1])
        sql, params = missing
        rest = self._all(
            f"{sql} ORDER BY r.seq {direction} LIMIT ? OFFSET ?",
            [*params, limit - len(seqs), max(0, offset - with_value)],
        )
        return seqs + [row[0] for row in rest]

    def _rollout_where(self, flt: RolloutFilter) -> tuple[str, str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if flt.reasons:
            clauses.append(f"r.termination_reason IN ({','.join('?' * len(flt.reasons))})")
            params.extend(flt.reasons)
        for name, value in (("example_id", flt.example_id), ("group_id", flt.group_id)):
            if value:
                clause, values = self._seq_ranges(name, value)
                clauses.append(clause)
                params.extend(values)
        if flt.step is not None:
            clauses.append("r.step = ?")
            params.append(flt.step)
        if flt.failed is not None:
            clauses.append("r.scored = 0" if flt.failed else "r.scored = 1")  # literal: the partial index matches
        if flt.component:
            # seq and component are the rewards' key: at most one row per rollout
            clauses.append("r.seq = c.seq AND c.component = ?")
            params.append(flt.component)
            if flt.low is not None:
                clauses.append("c.value >= ?")
                params.append(flt.low)
            if flt.high is not None:
                clauses.append("c.value <= ?")
                params.append(flt.high)
        if flt.text:
            clause, values = self._text_clause(flt.text, flt.in_transcript)
            clauses.append(clause)
            params.extend(values)
        source = "rollouts AS r, rewards AS c" if flt.component else "rollouts AS r"
        return source, ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _seq_ranges(self, column: str, value: str) -> tuple[str, list[Any]]:
        """Rollouts of a group or example, by the ``seq`` ranges of their groups."""
        ranges = self._all(
            f"SELECT first_seq, last_seq FROM groups WHERE {column} = ? ORDER BY first_seq LIMIT ?",
            (value, _MAX_RANGES + 1),
        )
        if not ranges:
            return "0", []
        if len(ranges) > _MAX_RANGES:
            return f"r.{column} = ?", [value]
        return "(" + " OR ".join("r.seq BETWEEN ? AND ?" for _ in ranges) + ")", [v for pair in ranges for v in pair]

    def _text_clause(self, text: str, in_transcript: bool) -> tuple[str, list[Any]]:
        if not self.searchable:
            fields = ["r.final_text", "r.error", "r.rollout_id", "r.example_id"]
            if in_transcript:
                fields.append("(SELECT t.messages FROM transcripts AS t WHERE t.seq = r.seq)")
            pattern = _like(text)
            return "(" + " OR ".join(f"{name} LIKE ? ESCAPE '\\'" for name in fields) + ")", [pattern] * len(fields)
        query = match_query(text, in_transcript=in_transcript)
        if query is None:
            return "0", []
        return "r.seq IN (SELECT rowid FROM rollouts_fts WHERE rollouts_fts MATCH ?)", [query]

    def _rows_by_seq(self, seqs: Sequence[int], snippet: int) -> list[dict[str, Any]]:
        if not seqs:
            return []
        marks = ",".join("?" * len(seqs))
        rows = self._all(f"SELECT {_ROW_COLUMNS} FROM rollouts AS r WHERE r.seq IN ({marks})", seqs)
        by_seq = {row[0]: row for row in rows}
        return [_rollout_row(by_seq[seq], snippet) for seq in seqs if seq in by_seq]

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

    def rewards(self, rollout_ids: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """``{rollout_id: {component: {"value", "filled"}}}`` for the given rollouts."""
        ids: dict[int, str] = {}
        for chunk in chunks(rollout_ids, SQL_PARAMETERS):
            marks = ",".join("?" * len(chunk))
            ids.update(self._all(f"SELECT seq, rollout_id FROM rollouts WHERE rollout_id IN ({marks})", chunk))
        return {ids[seq]: values for seq, values in self._rewards_by_seq(list(ids)).items()}

    def examples(
        self,
        *,
        sort: str = "idx",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
        text: str | None = None,
    ) -> Page:
        """Pass rate and mean reward per example, with a preview of its prompt.

        Figures come from the per-example figures the writer keeps; in dataset
        order (the default) the page is picked from the examples table, so examples
        without rollouts yet are listed too.
        """
        offset, limit = _bounds(offset, limit)
        key = ("examples", sort, descending, offset, limit, text)
        return self._page(key, lambda: self._examples(sort, descending, offset, limit, text))

    def _examples(self, sort: str, descending: bool, offset: int, limit: int, text: str | None) -> Page:
        direction = "DESC" if descending else "ASC"
        where, flt, params = "", "", []
        if text:
            where, flt, params = (
                "WHERE example_id LIKE ? ESCAPE '\\'",
                "WHERE f.example_id LIKE ? ESCAPE '\\'",
                [_like(text)],
            )
        with _figures.snapshot(self._conn()):
            if sort in ("idx", "example_id") and self._scalar("SELECT COUNT(*) FROM (SELECT 1 FROM examples LIMIT 1)"):
                total = self._scalar(f"SELECT COUNT(*) FROM examples {where}", params) or 0
                ids = [
                    row[0]
                    for row in self._all(
                        f"SELECT example_id FROM examples {where} ORDER BY {sort} {direction}, example_id {direction}"
                        " LIMIT ? OFFSET ?",
                        [*params, limit, offset],
                    )
                ]
            else:
                order = _EXAMPLE_SQL.get(sort, "f.idx")
                total = self._scalar(f"SELECT COUNT(*) FROM example_figures AS f {flt}", params) or 0
                ids = [
                    row[0]
                    for row in self._all(
                        f"SELECT f.example_id FROM example_figures AS f {flt}"
                        f" ORDER BY {order} {direction}, f.example_id {direction} LIMIT ? OFFSET ?",
                        [*params, limit, offset],
                    )
                ]
            return Page(self._example_rows(ids), total, offset, limit)

    def _example_rows(self, example_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not example_ids:
            return []
        marks = ",".join("?" * len(example_ids))
        figures = {
            row[0]: row
            for row in self._all(
                "SELECT example_id, idx, rollouts, passed, reward_sum, groups, failed FROM example_figures"
                f" WHERE example_id IN ({marks})",
                example_ids,
            )
        }
        index = dict(self._all(f"SELECT example_id, idx FROM examples WHERE example_id IN ({marks})", example_ids))
        prompts = self._prompts(example_ids)
        records = []
        for example_id in example_ids:
            _, idx, count, passed, reward_sum, groups, failed = figures.get(
                example_id, (example_id, -1, 0, 0, 0.0, 0, 0)
            )
            records.append(
                {
                    "example_id": example_id,
                    "idx": index.get(example_id, idx),
                    "rollouts": count,
                    "passed": passed,
                    "pass_rate": passed / count if count else None,
                    "mean_reward": reward_sum / count if count else None,
                    "groups": groups,
                    "failed": failed,
                    "prompt": prompts.get(example_id, ""),
                }
            )
        self._add_short_ids(records)
        return records

    def groups(
        self,
        *,
        sort: str = "order",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
        no_signal: bool | None = None,
        example_id: str | None = None,
    ) -> Page:
        """Groups with their reward spread; ``no_signal`` keeps those whose siblings all tie
        (``False``: those that do not)."""
        offset, limit = _bounds(offset, limit)
        key = ("groups", sort, descending, offset, limit, no_signal, example_id)
        return self._page(key, lambda: self._groups(sort, descending, offset, limit, no_signal, example_id))

    def _groups(
        self, sort: str, descending: bool, offset: int, limit: int, no_signal: bool | None, example_id: str | None
    ) -> Page:
        direction = "DESC" if descending else "ASC"
        clauses: list[str] = []
        params: list[Any] = []
        if example_id:
            clauses.append("example_id = ?")
            params.append(example_id)
        if no_signal is not None:
            clauses.append("size > 1 AND low = high" if no_signal else "(size <= 1 OR low IS NULL OR low != high)")
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        keys = QUERY_SPEC["groups"]["sorts"].get(sort, QUERY_SPEC["groups"]["sorts"]["order"])
        order = ", ".join(
            f"{_GROUP_SQL[key]} IS NULL, {_GROUP_SQL[key]} {direction}"
            if _GROUP_SQL[key] in _NULLABLE
            else f"{_GROUP_SQL[key]} {direction}"
            for key in keys
        )
        with _figures.snapshot(self._conn()):
            total = self._scalar(f"SELECT COUNT(*) FROM groups {where}", params) or 0
            rows = self._all(
                "SELECT group_id, example_id, example_idx, batch, step, size, reward_sum, reward_sq, low, high, failed"
                f" FROM groups {where} ORDER BY {order}, group_id {direction} LIMIT ? OFFSET ?",
                [*params, limit, offset],
            )
        records = [_group_row(row) for row in rows]
        self._add_short_ids(records)
        prompts = self._prompts([record["example_id"] for record in records])
        for record in records:
            record["prompt"] = prompts.get(record["example_id"], "")
        return Page(records, total, offset, limit)

    # -- single items ------------------------------------------------------------------

    def group(self, group_id: str) -> dict[str, Any] | None:
        """A group with its siblings, their components and advantages, and its own logs."""
        row = self._one(
            "SELECT group_id, example_id, example_idx, batch, step, size, started_at, ended_at, first_seq, last_seq"
            " FROM groups WHERE group_id = ?",
            (group_id,),
        )
        if row is None:
            return None
        names = ("group_id", "example_id", "example_idx", "batch", "step", "size", "started_at", "ended_at")
        group = dict(zip(names, row[:8], strict=True))
        first, last = row[8], row[9]
        rows = self._all(
            f"SELECT {_ROW_COLUMNS} FROM rollouts AS r WHERE r.seq BETWEEN ? AND ? ORDER BY r.sample_index",
            (first, last),
        )
        siblings = [_rollout_row(item, 4000) for item in rows]
        self._add_short_ids([group, *siblings])
        rewards = self._rewards_by_seq([sibling["seq"] for sibling in siblings])
        spread = group_spread([sibling["reward"] for sibling in siblings])
        mean, std = spread.mean, spread.std
        for sibling, advantage in zip(siblings, spread.advantages, strict=True):
            sibling["rewards"] = rewards.get(sibling["seq"], {})
            sibling["advantage"] = advantage
        components: dict[str, dict[str, float]] = {}
        for name in sorted({name for sibling in siblings for name in sibling["rewards"]}):
            values = [sibling["rewards"].get(name, {}).get("value", 0.0) for sibling in siblings]
            c_mean, c_std = _mean_std(values)
            components[name] = {"mean": c_mean, "std": c_std}
        group.update(
            siblings=siblings,
            mean=mean,
            std=std,
            no_signal=len(siblings) > 1 and std == 0,
            components=components,
            example=self.example(group["example_id"]),
            logs=self._logs("rollout_id IS NULL AND group_id = ?", (group_id,)),
            prev=self._neighbour_group(group, before=True),
            next=self._neighbour_group(group, before=False),
        )
        return group

    def _neighbour_group(self, group: Mapping[str, Any], *, before: bool) -> str | None:
        key = (group["example_idx"], -1 if group["step"] is None else group["step"], group["group_id"])
        op, direction = ("<", "DESC") if before else (">", "ASC")
        row = self._one(
            "SELECT group_id FROM groups WHERE (example_idx, COALESCE(step, -1), group_id) "
            f"{op} (?, ?, ?) ORDER BY example_idx {direction}, COALESCE(step, -1) {direction}, "
            f"group_id {direction} LIMIT 1",
            key,
        )
        return row[0] if row else None

    def example(self, example_id: str) -> dict[str, Any] | None:
        """An example's payload, with its prompt excerpt and the fields its reward reads (``example_args``)."""
        row = self._one("SELECT example_id, idx, split, payload FROM examples WHERE example_id = ?", (example_id,))
        if row is None:
            return None
        payload = _loads(row[3])
        return {
            "example_id": row[0],
            "idx": row[1],
            "split": row[2],
            "payload": payload,
            "prompt": prompt_excerpt(payload),
            "fields": example_fields(payload),
        }

    def rollout(self, rollout_id: str) -> dict[str, Any] | None:
        """Everything stored about one rollout, its logs and its neighbours."""
        row = self._one(
            "SELECT r.rollout_id, r.seq, r.group_id, r.example_id, r.sample_index, r.step, r.batch, r.split,"
            " r.termination_reason, r.error, r.scored, r.reward, r.prompt_tokens, r.completion_tokens, r.num_turns,"
            " r.num_tool_calls, r.started_at, r.ended_at, r.seconds, r.final_text, t.messages, t.turns, t.sampling"
            " FROM rollouts AS r JOIN transcripts AS t ON t.seq = r.seq WHERE r.rollout_id = ?",
            (rollout_id,),
        )
        if row is None:
            return None
        names = (
            "rollout_id", "seq", "group_id", "example_id", "sample_index", "step", "batch", "split",
            "termination_reason", "error", "scored", "reward", "prompt_tokens", "completion_tokens",
            "num_turns", "num_tool_calls", "started_at", "ended_at", "seconds", "final_text",
            "messages", "turns", "sampling",
        )  # fmt: skip
        record = dict(zip(names, row, strict=True))
        record["scored"] = bool(record["scored"])
        self._add_short_ids([record])
        for name in ("messages", "turns", "sampling"):
            record[name] = _decode(record[name])
        record["messages"] = record["messages"] or []
        record["turns"] = record["turns"] or []
        record["rewards"] = self._rewards_by_seq([record["seq"]]).get(record["seq"], {})
        record["logs"] = self._logs("rollout_id = ?", (rollout_id,))
        record["tool_errors"] = sorted(tool_error_ids(turn for turn in record["turns"] if isinstance(turn, dict)))
        example = self.example(record["example_id"])
        record["example_fields"] = example["fields"] if example else {}
        record["cost"] = self._cost(record["seq"])
        seq, group_id, sample = record["seq"], record["group_id"], record["sample_index"]
        first, last = self._one("SELECT first_seq, last_seq FROM groups WHERE group_id = ?", (group_id,)) or (seq, seq)
        siblings = self._all("SELECT seq, reward FROM rollouts WHERE seq BETWEEN ? AND ? ORDER BY sample_index",
                             (first, last))  # fmt: skip
        spread = group_spread([reward for _, reward in siblings])
        record["advantage"] = dict(zip((s for s, _ in siblings), spread.advantages, strict=True)).get(seq, 0.0)
        record["group_mean"] = spread.mean
        nearest = "SELECT rollout_id FROM rollouts WHERE {} ORDER BY {} LIMIT 1"
        record["nav"] = {
            "prev": self._scalar(nearest.format("seq < ?", "seq DESC"), (seq,)),
            "next": self._scalar(nearest.format("seq > ?", "seq"), (seq,)),
            "prev_sibling": self._scalar(
                nearest.format("seq BETWEEN ? AND ? AND sample_index < ?", "sample_index DESC"), (first, last, sample)
            ),
            "next_sibling": self._scalar(
                nearest.format("seq BETWEEN ? AND ? AND sample_index > ?", "sample_index"), (first, last, sample)
            ),
        }
        return record

    def _cost(self, seq: int) -> dict[str, Any] | None:
        """What the rollout's model calls cost (``usd`` ``None``: unknown); ``None`` when the run did not count them."""
        if not self._scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rollout_costs'"):
            return None
        row = self._one("SELECT usd, requests, cache_hits, calls FROM rollout_costs WHERE seq = ?", (seq,))
        if row is None:
            return None
        return {"usd": row[0], "requests": row[1], "cache_hits": row[2], "calls": _loads(row[3]) or []}

    def _logs(self, where: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT id, rollout_id, time, level, levelno, logger, message, file, line, turn, phase, "
            f"traceback FROM logs WHERE {where} ORDER BY id",
            params,
        )
        names = (
            "id", "rollout_id", "time", "level", "levelno", "logger", "message", "file", "line",
            "turn", "phase", "traceback",
        )  # fmt: skip
        return [dict(zip(names, row, strict=True)) for row in rows]

    def _prompts(self, example_ids: Sequence[str]) -> dict[str, str]:
        """Each example's prompt excerpt (see :func:`benchmax.store._excerpt.prompt_excerpt`)."""
        return prompt_excerpts(self._conn(), example_ids)

    def search_words(self, seqs: Sequence[int]) -> dict[int, list[str]]:
        """The words text search matches in each rollout's answer, error and ids (see :func:`match_query`)."""
        result: dict[int, list[str]] = {}
        for chunk in chunks(seqs, SQL_PARAMETERS):
            marks = ",".join("?" * len(chunk))
            for seq, *texts in self._all(
                f"SELECT seq, final_text, error, rollout_id, example_id FROM rollouts WHERE seq IN ({marks})", chunk
            ):
                result[seq] = search_words(*texts)
        return result

    def _db(self) -> sqlite3.Connection:
        return self._conn()


def match_query(text: str, *, in_transcript: bool) -> str | None:
    """``text`` as an FTS5 query: every word must begin a word of the searched columns.

    Words are runs of letters and digits (the index's ``unicode61`` rule), so no
    FTS5 syntax in the text can reach the query; ``None`` when it has no word.
    """
    words = _WORD.findall(_fold(text))
    if not words:
        return None
    terms = " ".join(f'"{word}"*' for word in words)
    return terms if in_transcript else f"{{answer error ids}} : ({terms})"


def search_words(*texts: str | None) -> list[str]:
    """The distinct words of ``texts`` as the search index holds them (folded, sorted)."""
    return sorted({word for text in texts if text for word in _WORD.findall(_fold(text))})


def _fold(text: str) -> str:
    """Lower case without diacritics, as the index's tokenizer folds words."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(ch))


def _rollout_row(row: Sequence[Any], snippet: int) -> dict[str, Any]:
    (
        seq, rollout_id, group_id, example_id, sample_index, step, batch, reason, error, scored,
        reward, prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, seconds,
        final_text,
    ) = row  # fmt: skip
    return {
        "seq": seq,
        "rollout_id": rollout_id,
        "group_id": group_id,
        "example_id": example_id,
        "sample_index": sample_index,
        "step": step,
        "batch": batch,
        "termination_reason": reason,
        "error": _cut(error, snippet) if error else None,
        "scored": bool(scored),
        "reward": reward,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "num_turns": num_turns,
        "num_tool_calls": num_tool_calls,
        "started_at": started_at,
        "seconds": seconds,
        "final_text": _cut(final_text or "", snippet),
        "final_chars": len(final_text or ""),
    }


def _group_row(row: Sequence[Any]) -> dict[str, Any]:
    group_id, example_id, example_idx, batch, step, size, reward_sum, reward_sq, low, high, failed = row
    mean = reward_sum / size if size else 0.0
    variance = max(0.0, reward_sq / size - mean * mean) if size else 0.0
    return {
        "group_id": group_id,
        "example_id": example_id,
        "example_idx": example_idx,
        "batch": batch,
        "step": step,
        "size": size,
        "mean": mean,
        "std": math.sqrt(variance),
        "low": low,
        "high": high,
        "failed": failed,
        "no_signal": size > 1 and low == high,
    }


def _number(value: Any, name: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _step(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        step = int(value)
    except (TypeError, ValueError):
        step = -1
    if step < 0:
        raise ValueError(f"step must be a whole number >= 0, got {value!r}")
    return step


def _bounds(offset: int, limit: int) -> tuple[int, int]:
    return max(0, int(offset)), max(1, min(MAX_PAGE, int(limit)))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _loads(value: str | bytes | None) -> Any:
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _decode(value: bytes | str | None) -> Any:
    try:
        return _codec.decode(value)
    except orjson.JSONDecodeError:
        return value


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    variance = sum((value - mean) ** 2 for value in values) / len(values)
    return mean, math.sqrt(variance)
