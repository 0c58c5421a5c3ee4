"""Paginated, filtered and sorted read queries over one run, for the inspector.

Every query returns one page and its total; nothing here loads a whole run into
memory, so a 100k-rollout run answers each call in milliseconds. The connection
is read-only: the inspector may watch a run while the runner is still writing it.
Sort keys and filters come from URLs, so they are mapped onto a fixed set of SQL
expressions and bound parameters, never spliced into SQL text.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import is_scorable
from benchmax.store import schema

SNIPPET_CHARS = 240
MAX_PAGE = 500


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
    """What the run page's rollout table may be narrowed by.

    ``component`` with ``low``/``high`` keeps rollouts whose value of that
    component lies in ``[low, high]``; ``text`` searches the final answer, the
    error and the ids (and the whole transcript with ``in_transcript``).
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


_ROLLOUT_SORTS = {
    "seq": "r.seq",
    "rollout_id": "r.rollout_id",
    "example_id": "r.example_id",
    "group_id": "r.group_id",
    "sample_index": "r.sample_index",
    "termination_reason": "r.termination_reason",
    "reward": "r.reward",
    "prompt_tokens": "r.prompt_tokens",
    "completion_tokens": "r.completion_tokens",
    "num_turns": "r.num_turns",
    "num_tool_calls": "r.num_tool_calls",
    "seconds": "r.seconds",
    "started_at": "r.started_at",
    "final_text": "r.final_text",
}
_EXAMPLE_SORTS = {
    "rollouts": "rollouts",
    "passed": "passed",
    "pass_rate": "pass_rate",
    "mean_reward": "mean_reward",
    "groups": "groups",
}
_NULLABLE = {"r.reward"}
_ROLLOUT_COLUMNS = (
    "r.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step, r.batch, "
    "r.termination_reason, r.error, r.scored, r.reward, r.prompt_tokens, r.completion_tokens, "
    "r.num_turns, r.num_tool_calls, r.started_at, r.seconds, r.final_text"
)


class RunQueries:
    """Read-only queries over one run's ``run.sqlite``.

    Each thread gets its own connection: the inspector answers requests from a
    thread pool, and a slow whole-run figure must not hold up a table page.
    Whole-run figures are cached until the run changes (new rollouts, a batch
    zero-fill, a status change), so a finished run computes them once.
    """

    def __init__(self, path: str | Path) -> None:
        db = schema.locate(path)
        self.path = db.parent
        self.db = db
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self._conn()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = schema.connect(self.db, readonly=True)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

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
        rows = self._conn().execute(sql, tuple(params)).fetchall()
        return rows[0] if rows else None

    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._one(sql, params)
        return row[0] if row else None

    def _page_ids(
        self, source: str, key: str, order: str, params: Sequence[Any], offset: int, limit: int
    ) -> tuple[int, list[Any]]:
        """How many rows ``source`` (a table with its WHERE, or a parenthesised
        subquery) holds, and the ``key`` of one page of them in ``order``."""
        total = self._scalar(f"SELECT COUNT(*) FROM {source}", params) or 0
        rows = self._all(f"SELECT {key} FROM {source} ORDER BY {order} LIMIT ? OFFSET ?", [*params, limit, offset])
        return total, [row[0] for row in rows]

    def _cached(self, name: str, compute: Any) -> Any:
        stamp = self._stamp()
        hit = self._cache.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = compute()
        self._cache[name] = (stamp, value)
        return value

    def _stamp(self) -> tuple[Any, ...]:
        """Changes whenever the writer adds rollouts, fills a batch or updates the metadata."""
        return (
            self._scalar("SELECT COUNT(*) FROM rollouts"),
            self._scalar("SELECT MAX(seq) FROM rollouts"),
            self._scalar("SELECT COUNT(*) FROM rewards"),
            tuple(self._all("SELECT key, value FROM meta ORDER BY key")),
        )

    # -- run level -------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        rows = self._all("SELECT key, value FROM meta WHERE key != 'schema_version'")
        return {key: _loads(value) for key, value in rows}

    def _threshold(self) -> float:
        value = _loads(self._scalar("SELECT value FROM meta WHERE key = 'pass_threshold'"))
        return float(value) if isinstance(value, int | float) else 1.0

    def progress(self) -> dict[str, Any]:
        """The cheap figures (index-only) a page polls to notice new rollouts."""
        status = self._scalar("SELECT value FROM meta WHERE key = 'status'")
        return {
            "rollouts": self._scalar("SELECT COUNT(*) FROM rollouts"),
            "last_seq": self._scalar("SELECT COALESCE(MAX(seq), -1) FROM rollouts"),
            "rewards": self._scalar("SELECT COUNT(*) FROM rewards"),
            "status": _loads(status) if status else None,
        }

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
        """What the runs list shows for one run: size, mean per component, failure rate."""
        return self._cached("headline", self._headline)

    def _headline(self) -> dict[str, Any]:
        total = self._scalar("SELECT COUNT(*) FROM rollouts") or 0
        scored = self._scalar("SELECT COUNT(DISTINCT rollout_id) FROM rewards WHERE filled = 0") or 0
        passed = self._passed(self._threshold())
        means = dict(self._all("SELECT component, AVG(value) FROM rewards GROUP BY component ORDER BY 1"))
        return {
            "rollouts": total,
            "scored": scored,
            "failed": total - scored,
            "failure_rate": (total - scored) / total if total else 0.0,
            "pass_rate": passed / total if total else 0.0,
            "pass_threshold": self._threshold(),
            "components": means,
        }

    def _passed(self, threshold: float) -> int:
        # the reward index answers this; NULL (unscored) counts as 0, as in RunStats
        passed = self._scalar("SELECT COUNT(*) FROM rollouts WHERE reward >= ?", (threshold,)) or 0
        if threshold <= 0:
            passed += self._scalar("SELECT COUNT(*) FROM rollouts WHERE reward IS NULL") or 0
        return passed

    def overview(self, *, bins: int = 20) -> dict[str, Any]:
        """The run page's headline figures; every query here is answered from an index."""
        return self._cached(f"overview:{bins}", lambda: self._overview(bins))

    def _overview(self, bins: int) -> dict[str, Any]:
        head = self._headline()
        total = head["rollouts"]
        components: dict[str, dict[str, Any]] = {}
        for name, count, mean, low, high, squares in self._all(
            "SELECT component, COUNT(*), AVG(value), MIN(value), MAX(value), SUM(value * value) "
            "FROM rewards GROUP BY component ORDER BY component"
        ):
            variance = max(0.0, squares / count - mean * mean) if count else 0.0
            components[name] = {
                "count": count,
                "mean": mean,
                "std": math.sqrt(variance),
                "min": low,
                "max": high,
                "histogram": self._histogram(
                    "SELECT value AS v FROM rewards WHERE component = ?", (name,), low, high, bins
                ),
            }
        reasons = [
            {"reason": reason, "count": count, "scored": is_scorable(reason)}
            for reason, count in self._all(
                "SELECT termination_reason, COUNT(*) FROM rollouts GROUP BY termination_reason ORDER BY COUNT(*) DESC"
            )
        ]
        reward_range = self._one("SELECT MIN(reward), MAX(reward) FROM rollouts") or (None, None)
        meta = self.meta()
        return {
            **head,
            "passed": round(head["pass_rate"] * total),
            "examples": self._scalar("SELECT COUNT(DISTINCT example_id) FROM rollouts") or 0,
            "groups": self._scalar("SELECT COUNT(*) FROM groups") or 0,
            "components": components,
            "reward_histogram": self._histogram(
                "SELECT reward AS v FROM rollouts WHERE reward IS NOT NULL", (), *reward_range, bins
            ),
            "reasons": reasons,
            "started_at": meta.get("started_at"),
            "ended_at": meta.get("ended_at"),
        }

    def distributions(self, *, bins: int = 20) -> dict[str, Any]:
        """The figures that need a pass over every rollout: latency and token spreads,
        zero-fills per component, groups without learning signal. The run page asks for
        these after it has drawn, so a big run opens at once and fills them in."""
        return self._cached(f"distributions:{bins}", lambda: self._distributions(bins))

    def _distributions(self, bins: int) -> dict[str, Any]:
        rows = self._all(
            "SELECT seconds, completion_tokens, prompt_tokens, num_turns, num_tool_calls, started_at, "
            "ended_at FROM rollouts"
        )
        seconds = sorted(row[0] for row in rows)
        completion = sorted(row[1] for row in rows)
        groups, no_signal = self._one(
            "SELECT COUNT(*), COALESCE(SUM(low = high AND n > 1), 0) FROM ("
            " SELECT MIN(COALESCE(reward, 0)) AS low, MAX(COALESCE(reward, 0)) AS high,"
            " COUNT(*) AS n FROM rollouts GROUP BY group_id)"
        ) or (0, 0)
        return {
            "latency": {
                "mean": sum(seconds) / len(seconds) if seconds else 0.0,
                "p50": _quantile(seconds, 0.50),
                "p95": _quantile(seconds, 0.95),
                "max": seconds[-1] if seconds else 0.0,
                "histogram": _bins(seconds, bins),
            },
            "tokens": {
                "prompt": sum(row[2] for row in rows),
                "completion": sum(completion),
                "completion_p50": _quantile(completion, 0.50),
                "completion_p95": _quantile(completion, 0.95),
                "histogram": _bins(completion, bins),
            },
            "turns": sum(row[3] for row in rows),
            "tool_calls": sum(row[4] for row in rows),
            "first_started_at": min((row[5] for row in rows), default=None),
            "last_ended_at": max((row[6] for row in rows), default=None),
            "filled": dict(self._all("SELECT component, COUNT(*) FROM rewards WHERE filled = 1 GROUP BY component")),
            "groups_with_rollouts": groups,
            "groups_no_signal": no_signal,
        }

    def _histogram(
        self, source: str, params: tuple[Any, ...], low: float | None, high: float | None, bins: int
    ) -> list[dict[str, Any]]:
        """Bars of a column: one per value when there are few distinct values, else equal bins."""
        if low is None or high is None:
            return []
        distinct = self._all(f"SELECT v, COUNT(*) FROM ({source}) GROUP BY v ORDER BY v LIMIT ?", (*params, bins + 1))
        if len(distinct) <= bins:
            return [{"low": v, "high": v, "count": n} for v, n in distinct]
        width = (high - low) / bins
        counts = dict(
            self._all(
                f"SELECT MIN(CAST((v - ?) / ? AS INTEGER), ?), COUNT(*) FROM ({source}) GROUP BY 1",
                (low, width, bins - 1, *params),
            )
        )
        return [{"low": low + i * width, "high": low + (i + 1) * width, "count": counts.get(i, 0)} for i in range(bins)]

    # -- tables ----------------------------------------------------------------

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

        The page's rowids are picked first (from an index when the sort has one)
        and only those rows are read, so the last page costs what the first does.
        """
        flt = flt or RolloutFilter()
        offset, limit = _bounds(offset, limit)
        where, params = _rollout_where(flt)
        joins, join_params = "", []
        if sort.startswith("c:"):
            joins = "LEFT JOIN rewards AS s ON s.rollout_id = r.rollout_id AND s.component = ?"
            join_params = [sort[2:]]
            order = "s.value IS NULL, s.value"
        else:
            order = _ROLLOUT_SORTS.get(sort, "r.seq")
            if order in _NULLABLE:
                order = f"{order} IS NULL, {order}"
        direction = "DESC" if descending else "ASC"
        order_sql = ", ".join(part if part.endswith("IS NULL") else f"{part} {direction}" for part in order.split(", "))
        total = self._scalar(f"SELECT COUNT(*) FROM rollouts AS r {where}", params)
        rowids = [
            row[0]
            for row in self._all(
                f"SELECT r.rowid FROM rollouts AS r {joins} {where} "
                f"ORDER BY {order_sql}, r.seq {direction} LIMIT ? OFFSET ?",
                [*join_params, *params, limit, offset],
            )
        ]
        records = self._rows_by_rowid(rowids, snippet)
        rewards = self.rewards([record["rollout_id"] for record in records])
        for record in records:
            record["rewards"] = rewards.get(record["rollout_id"], {})
        return Page(records, total or 0, offset, limit)

    def _rows_by_rowid(self, rowids: Sequence[int], snippet: int) -> list[dict[str, Any]]:
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        rows = self._all(f"SELECT r.rowid, {_ROLLOUT_COLUMNS} FROM rollouts AS r WHERE r.rowid IN ({marks})", rowids)
        by_rowid = {row[0]: row[1:] for row in rows}
        return [_rollout_row(by_rowid[rowid], snippet) for rowid in rowids if rowid in by_rowid]

    def rewards(self, rollout_ids: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """``{rollout_id: {component: {"value", "filled"}}}`` for the given rollouts."""
        result: dict[str, dict[str, dict[str, Any]]] = {}
        for chunk in _chunks(rollout_ids, 500):
            marks = ",".join("?" * len(chunk))
            for rollout_id, component, value, filled in self._all(
                f"SELECT rollout_id, component, value, filled FROM rewards "
                f"WHERE rollout_id IN ({marks}) ORDER BY component",
                chunk,
            ):
                result.setdefault(rollout_id, {})[component] = {"value": value, "filled": bool(filled)}
        return result

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

        In dataset order (the default) the page of examples is picked from the
        examples table and only its rollouts are read; sorting by a figure has to
        aggregate every rollout first.
        """
        offset, limit = _bounds(offset, limit)
        direction = "DESC" if descending else "ASC"
        where, params = "", []
        if text:
            where, params = "WHERE example_id LIKE ? ESCAPE '\\'", [_like(text)]
        if sort in ("idx", "example_id"):
            total, ids = self._page_ids(f"examples {where}", "example_id", f"{sort} {direction}", params, offset, limit)
            if total:
                return Page(self._example_rows(ids), total, offset, limit)
        threshold = self._threshold()
        inner = (
            "SELECT example_id, COUNT(*) AS rollouts, SUM(COALESCE(reward, 0) >= ?) AS passed,"
            " CAST(SUM(COALESCE(reward, 0) >= ?) AS REAL) / COUNT(*) AS pass_rate,"
            " AVG(reward) AS mean_reward, COUNT(DISTINCT group_id) AS groups"
            f" FROM rollouts {where} GROUP BY example_id"
        )
        params = [threshold, threshold, *params]
        order = _EXAMPLE_SORTS.get(sort, "example_id")
        if order == "idx":
            order = "example_id"
        total, ids = self._page_ids(
            f"({inner})", "example_id", f"{order} {direction}, example_id", params, offset, limit
        )
        return Page(self._example_rows(ids), total, offset, limit)

    def _example_rows(self, example_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not example_ids:
            return []
        threshold = self._threshold()
        marks = ",".join("?" * len(example_ids))
        figures = {
            row[0]: row
            for row in self._all(
                "SELECT example_id, COUNT(*), SUM(COALESCE(reward, 0) >= ?), AVG(reward),"
                " COUNT(DISTINCT group_id), SUM(scored = 0)"
                f" FROM rollouts WHERE example_id IN ({marks}) GROUP BY example_id",
                [threshold, *example_ids],
            )
        }
        index = dict(self._all(f"SELECT example_id, idx FROM examples WHERE example_id IN ({marks})", example_ids))
        prompts = self._prompts(example_ids)
        records = []
        for example_id in example_ids:
            _, count, passed, mean, groups, failed = figures.get(example_id, (example_id, 0, 0, None, 0, 0))
            records.append(
                {
                    "example_id": example_id,
                    "idx": index.get(example_id, -1),
                    "rollouts": count,
                    "passed": passed,
                    "pass_rate": passed / count if count else None,
                    "mean_reward": mean,
                    "groups": groups,
                    "failed": failed,
                    "prompt": prompts.get(example_id, ""),
                }
            )
        return records

    def groups(
        self,
        *,
        sort: str = "order",
        descending: bool = False,
        offset: int = 0,
        limit: int = 50,
        no_signal: bool = False,
        example_id: str | None = None,
    ) -> Page:
        """Groups with their reward spread; ``no_signal`` keeps those whose siblings all tie.

        Like :meth:`examples`, the stored order pages through the groups table and
        reads only the page's rollouts; a figure sort or the no-signal filter
        aggregates the whole run.
        """
        offset, limit = _bounds(offset, limit)
        direction = "DESC" if descending else "ASC"
        where, params = "", []
        if example_id:
            where, params = "WHERE example_id = ?", [example_id]
        if sort in ("order", "group_id", "example_id", "batch") and not no_signal:
            order = {"order": "example_idx {d}, step {d}"}.get(sort, f"{sort} {{d}}").format(d=direction)
            total, ids = self._page_ids(f"groups {where}", "group_id", f"{order}, group_id", params, offset, limit)
            return Page(self._group_rows(ids), total, offset, limit)
        inner = (
            "SELECT group_id, COUNT(*) AS n, AVG(COALESCE(reward, 0)) AS mean,"
            " MIN(COALESCE(reward, 0)) AS low, MAX(COALESCE(reward, 0)) AS high,"
            " SUM(scored = 0) AS failed,"
            " AVG(COALESCE(reward, 0) * COALESCE(reward, 0)) - AVG(COALESCE(reward, 0)) * AVG(COALESCE(reward, 0))"
            " AS variance"
            f" FROM rollouts {where} GROUP BY group_id" + (" HAVING n > 1 AND low = high" if no_signal else "")
        )
        order = {"size": "n", "std": "variance"}.get(sort, sort)
        if order not in ("n", "mean", "low", "high", "failed", "variance"):
            order = "group_id"
        total, ids = self._page_ids(f"({inner})", "group_id", f"{order} {direction}, group_id", params, offset, limit)
        return Page(self._group_rows(ids), total, offset, limit)

    def _group_rows(self, group_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not group_ids:
            return []
        marks = ",".join("?" * len(group_ids))
        info = {
            row[0]: row
            for row in self._all(
                f"SELECT group_id, example_id, example_idx, batch, step, size FROM groups WHERE group_id IN ({marks})",
                group_ids,
            )
        }
        rewards: dict[str, list[float]] = {}
        failed: dict[str, int] = {}
        for group_id, reward, scored in self._all(
            f"SELECT group_id, reward, scored FROM rollouts WHERE group_id IN ({marks})", group_ids
        ):
            rewards.setdefault(group_id, []).append(reward if reward is not None else 0.0)
            failed[group_id] = failed.get(group_id, 0) + (0 if scored else 1)
        records = []
        for group_id in group_ids:
            _, example, idx, batch, step, size = info.get(group_id, (group_id, None, None, None, None, 0))
            values = rewards.get(group_id, [])
            mean, std = _mean_std(values)
            records.append(
                {
                    "group_id": group_id,
                    "example_id": example,
                    "example_idx": idx,
                    "batch": batch,
                    "step": step,
                    "size": len(values) or size,
                    "mean": mean,
                    "std": std,
                    "low": min(values, default=None),
                    "high": max(values, default=None),
                    "failed": failed.get(group_id, 0),
                    "no_signal": len(values) > 1 and min(values) == max(values),
                }
            )
        return records

    # -- single items ------------------------------------------------------------

    def group(self, group_id: str) -> dict[str, Any] | None:
        """A group with its siblings, their components and advantages, and its own logs."""
        row = self._one(
            "SELECT group_id, example_id, example_idx, batch, step, size, started_at, ended_at "
            "FROM groups WHERE group_id = ?",
            (group_id,),
        )
        if row is None:
            return None
        names = ("group_id", "example_id", "example_idx", "batch", "step", "size", "started_at", "ended_at")
        group = dict(zip(names, row, strict=True))
        rows = self._all(
            f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts AS r WHERE r.group_id = ? ORDER BY r.sample_index",
            (group_id,),
        )
        siblings = [_rollout_row(row, 4000) for row in rows]
        rewards = self.rewards([sibling["rollout_id"] for sibling in siblings])
        totals = [sibling["reward"] if sibling["reward"] is not None else 0.0 for sibling in siblings]
        mean, std = _mean_std(totals)
        for sibling, total in zip(siblings, totals, strict=True):
            sibling["rewards"] = rewards.get(sibling["rollout_id"], {})
            sibling["advantage"] = (total - mean) / std if std > 0 else 0.0
        components: dict[str, dict[str, float]] = {}
        names_seen = sorted({name for sibling in siblings for name in sibling["rewards"]})
        for name in names_seen:
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
        row = self._one("SELECT example_id, idx, split, payload FROM examples WHERE example_id = ?", (example_id,))
        if row is None:
            return None
        return {"example_id": row[0], "idx": row[1], "split": row[2], "payload": _loads(row[3])}

    def rollout(self, rollout_id: str) -> dict[str, Any] | None:
        """Everything stored about one rollout, its logs and its neighbours."""
        row = self._one(
            "SELECT rollout_id, seq, group_id, example_id, sample_index, step, batch, split, "
            "termination_reason, error, scored, reward, prompt_tokens, completion_tokens, num_turns, "
            "num_tool_calls, started_at, ended_at, seconds, final_text, messages, turns, sampling "
            "FROM rollouts WHERE rollout_id = ?",
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
        for name in ("messages", "turns", "sampling"):
            record[name] = _loads(record[name]) if record[name] else None
        record["messages"] = record["messages"] or []
        record["turns"] = record["turns"] or []
        record["rewards"] = self.rewards([rollout_id]).get(rollout_id, {})
        record["logs"] = self._logs("rollout_id = ?", (rollout_id,))
        seq, group_id, sample = record["seq"], record["group_id"], record["sample_index"]
        nearest = "SELECT rollout_id FROM rollouts WHERE {} ORDER BY {} LIMIT 1"
        record["nav"] = {
            "prev": self._scalar(nearest.format("seq < ?", "seq DESC"), (seq,)),
            "next": self._scalar(nearest.format("seq > ?", "seq"), (seq,)),
            "prev_sibling": self._scalar(
                nearest.format("group_id = ? AND sample_index < ?", "sample_index DESC"), (group_id, sample)
            ),
            "next_sibling": self._scalar(
                nearest.format("group_id = ? AND sample_index > ?", "sample_index"), (group_id, sample)
            ),
        }
        return record

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
        """The last prompt message of each example, cut to a snippet."""
        result: dict[str, str] = {}
        for chunk in _chunks(example_ids, 500):
            marks = ",".join("?" * len(chunk))
            for example_id, payload in self._all(
                f"SELECT example_id, payload FROM examples WHERE example_id IN ({marks})", chunk
            ):
                messages = (_loads(payload) or {}).get("prompt_messages") or []
                text = _text(messages[-1].get("content")) if messages and isinstance(messages[-1], dict) else ""
                result[example_id] = _cut(text, SNIPPET_CHARS)
        return result

    def example_means(self) -> dict[str, dict[str, Any]]:
        """Per example: rollouts, mean total reward, passes and per-component means (for diffs)."""
        threshold = float(self.meta().get("pass_threshold", 1.0) or 1.0)
        result: dict[str, dict[str, Any]] = {}
        for example_id, n, mean, passed in self._all(
            "SELECT example_id, COUNT(*), AVG(COALESCE(reward, 0)), SUM(COALESCE(reward, 0) >= ?) "
            "FROM rollouts GROUP BY example_id",
            (threshold,),
        ):
            result[example_id] = {"rollouts": n, "mean": mean, "passed": passed, "components": {}}
        for example_id, component, mean in self._all(
            "SELECT r.example_id, w.component, AVG(w.value) FROM rewards AS w "
            "JOIN rollouts AS r ON r.rollout_id = w.rollout_id GROUP BY r.example_id, w.component"
        ):
            if example_id in result:
                result[example_id]["components"][component] = mean
        return result


def compare(
    a: RunQueries,
    b: RunQueries,
    *,
    sort: str = "delta",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
    changed_only: bool = False,
) -> dict[str, Any]:
    """Two runs side by side: per-component and per-example deltas (``b - a``).

    Examples are matched by id, which survives re-ordering of the dataset file.
    """
    offset, limit = _bounds(offset, limit)
    head_a, head_b = a.headline(), b.headline()
    names = sorted(set(head_a["components"]) | set(head_b["components"]))
    components = [
        {
            "component": name,
            "a": head_a["components"].get(name),
            "b": head_b["components"].get(name),
            "delta": _delta(head_a["components"].get(name), head_b["components"].get(name)),
        }
        for name in names
    ]
    per_a, per_b = a.example_means(), b.example_means()
    rows = []
    for example_id in per_a.keys() | per_b.keys():
        left, right = per_a.get(example_id), per_b.get(example_id)
        row = {
            "example_id": example_id,
            "a": left["mean"] if left else None,
            "b": right["mean"] if right else None,
            "a_pass": left["passed"] / left["rollouts"] if left else None,
            "b_pass": right["passed"] / right["rollouts"] if right else None,
            "a_rollouts": left["rollouts"] if left else 0,
            "b_rollouts": right["rollouts"] if right else 0,
            "components": {
                name: _delta(
                    (left or {}).get("components", {}).get(name),
                    (right or {}).get("components", {}).get(name),
                )
                for name in names
            },
        }
        row["delta"] = _delta(row["a"], row["b"])
        row["pass_delta"] = _delta(row["a_pass"], row["b_pass"])
        rows.append(row)
    if changed_only:
        rows = [row for row in rows if row["delta"] is None or abs(row["delta"]) > 1e-12]
    key = sort if sort in {"delta", "pass_delta", "a", "b", "example_id"} else "delta"

    def sort_key(row: dict[str, Any]) -> tuple[Any, ...]:
        value = row[key]
        if key == "delta" and value is not None:
            value = abs(value)
        return (value is None, value if value is not None else 0, row["example_id"])

    rows.sort(key=sort_key, reverse=descending)
    if descending:
        rows.sort(key=lambda row: row[key] is None)
    return {
        "components": components,
        "headline": {"a": head_a, "b": head_b},
        "only_a": len(per_a.keys() - per_b.keys()),
        "only_b": len(per_b.keys() - per_a.keys()),
        "common": len(per_a.keys() & per_b.keys()),
        "examples": Page(rows[offset : offset + limit], len(rows), offset, limit).to_dict(),
    }


def _rollout_where(flt: RolloutFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if flt.reasons:
        clauses.append(f"r.termination_reason IN ({','.join('?' * len(flt.reasons))})")
        params.extend(flt.reasons)
    if flt.example_id:
        clauses.append("r.example_id = ?")
        params.append(flt.example_id)
    if flt.group_id:
        clauses.append("r.group_id = ?")
        params.append(flt.group_id)
    if flt.step is not None:
        clauses.append("r.step = ?")
        params.append(flt.step)
    if flt.failed is not None:
        clauses.append("r.scored = ?")
        params.append(0 if flt.failed else 1)
    if flt.component:
        bounds = ["c.component = ?"]
        params.append(flt.component)
        if flt.low is not None:
            bounds.append("c.value >= ?")
            params.append(flt.low)
        if flt.high is not None:
            bounds.append("c.value <= ?")
            params.append(flt.high)
        clauses.append("r.rollout_id IN (SELECT c.rollout_id FROM rewards AS c WHERE " + " AND ".join(bounds) + ")")
    if flt.text:
        pattern = _like(flt.text)
        fields = ["r.final_text", "r.error", "r.rollout_id", "r.example_id"]
        if flt.in_transcript:
            fields.append("r.messages")
        clauses.append("(" + " OR ".join(f"{name} LIKE ? ESCAPE '\\'" for name in fields) + ")")
        params.extend([pattern] * len(fields))
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


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


def _bounds(offset: int, limit: int) -> tuple[int, int]:
    return max(0, int(offset)), max(1, min(MAX_PAGE, int(limit)))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _loads(value: str | bytes | None) -> Any:
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest rank, as :mod:`benchmax.store.stats` computes it."""
    if not sorted_values:
        return 0.0
    return float(sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1])


def _bins(sorted_values: Sequence[float], bins: int) -> list[dict[str, Any]]:
    """Histogram bars of sorted values: one per value when few are distinct, else equal bins."""
    if not sorted_values:
        return []
    distinct: dict[float, int] = {}
    for value in sorted_values:
        distinct[value] = distinct.get(value, 0) + 1
        if len(distinct) > bins:
            break
    else:
        return [{"low": value, "high": value, "count": count} for value, count in distinct.items()]
    low, high = sorted_values[0], sorted_values[-1]
    width = (high - low) / bins
    counts = [0] * bins
    for value in sorted_values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [{"low": low + i * width, "high": low + (i + 1) * width, "count": count} for i, count in enumerate(counts)]


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    variance = sum((value - mean) ** 2 for value in values) / len(values)
    return mean, math.sqrt(variance)


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _chunks(items: Sequence[Any] | Iterable[Any], size: int) -> Iterable[list[Any]]:
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = ["Page", "RolloutFilter", "RunQueries", "compare"]
