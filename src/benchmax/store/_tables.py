"""The inspector's tables: a page of rollouts, examples or groups, and its total.

Nothing here loads a whole run into memory: each page picks its keys from an index
and reads only those rows, so the last page costs what the first does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmax.store import _figures
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._query_base import QueryBase
from benchmax.store._query_rows import _ROW_COLUMNS, SNIPPET_CHARS, _group_row, _rollout_row
from benchmax.store._query_spec import (
    _EXAMPLE_SQL,
    _EXAMPLE_TABLE_SQL,
    _GROUP_SQL,
    _NULLABLE,
    _ROLLOUT_SQL,
    QUERY_SPEC,
    Page,
    RolloutFilter,
    _bounds,
)
from benchmax.store._search import _like, match_query

_MAX_RANGES = 200


class TableQueries(QueryBase):
    """The table pages of :class:`~benchmax.store.RunQueries` (which it is part of)."""

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
        if flt.env is not None:
            clause, values = self._env_clause(_ROLLOUT_SQL["env"], flt.env)
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

    def _env_clause(self, column: str, env: str) -> tuple[str, list[Any]]:
        """Rows of ``env``: an example that names no env is of the run's own (a run of one env)."""
        return f"COALESCE({column}, ?) = ?", [self._env_label(), env]

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
        records = [_rollout_row(by_seq[seq], snippet) for seq in seqs if seq in by_seq]
        self._label_envs(records)
        return records

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
        env: str | None = None,
    ) -> Page:
        """Pass rate and mean reward per example, with a preview of its prompt; ``env`` keeps
        one env's examples (a mixture's member; a run of one env names its own).

        Figures come from the per-example figures the writer keeps; in dataset
        order (the default), by id or by env the page is picked from the examples table,
        so examples without rollouts yet are listed too.
        """
        offset, limit = _bounds(offset, limit)
        key = ("examples", sort, descending, offset, limit, text, env)
        return self._page(key, lambda: self._examples(sort, descending, offset, limit, text, env))

    def _examples(
        self, sort: str, descending: bool, offset: int, limit: int, text: str | None, env: str | None
    ) -> Page:
        direction = "DESC" if descending else "ASC"
        with _figures.snapshot(self._conn()):
            sorts = QUERY_SPEC["examples"]["sorts"]
            order = sorts.get(sort, sorts["idx"])
            if sort in _EXAMPLE_TABLE_SQL and self._scalar("SELECT COUNT(*) FROM (SELECT 1 FROM examples LIMIT 1)"):
                source, columns = "examples", _EXAMPLE_TABLE_SQL
            else:
                source, columns = "example_figures AS f", _EXAMPLE_SQL
            clauses: list[str] = []
            params: list[Any] = []
            if text:
                clauses.append(f"{columns['example_id']} LIKE ? ESCAPE '\\'")
                params.append(_like(text))
            if env is not None:
                clause, values = self._env_clause(columns["env"], env)
                clauses.append(clause)
                params.extend(values)
            where = "WHERE " + " AND ".join(clauses) if clauses else ""
            total = self._scalar(f"SELECT COUNT(*) FROM {source} {where}", params) or 0
            ids = [
                row[0]
                for row in self._all(
                    f"SELECT {columns['example_id']} FROM {source} {where}"
                    f" ORDER BY {_order(columns, order, direction)}, {columns['example_id']} {direction}"
                    " LIMIT ? OFFSET ?",
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
        stored = {
            row[0]: row[1:]
            for row in self._all(
                f"SELECT example_id, idx, env FROM examples WHERE example_id IN ({marks})", example_ids
            )
        }
        prompts = self._prompts(example_ids)
        records = []
        for example_id in example_ids:
            _, idx, count, passed, reward_sum, groups, failed = figures.get(
                example_id, (example_id, -1, 0, 0, 0.0, 0, 0)
            )
            records.append(
                {
                    "example_id": example_id,
                    "idx": stored[example_id][0] if example_id in stored else idx,
                    "env": stored[example_id][1] if example_id in stored else None,
                    "rollouts": count,
                    "passed": passed,
                    "pass_rate": passed / count if count else None,
                    "mean_reward": reward_sum / count if count else None,
                    "groups": groups,
                    "failed": failed,
                    "prompt": prompts.get(example_id, ""),
                }
            )
        self._label_envs(records)
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
        env: str | None = None,
    ) -> Page:
        """Groups with their reward spread; ``no_signal`` keeps those whose siblings all tie
        (``False``: those that do not); ``env`` keeps one env's groups."""
        offset, limit = _bounds(offset, limit)
        key = ("groups", sort, descending, offset, limit, no_signal, example_id, env)
        return self._page(key, lambda: self._groups(sort, descending, offset, limit, no_signal, example_id, env))

    def _groups(
        self,
        sort: str,
        descending: bool,
        offset: int,
        limit: int,
        no_signal: bool | None,
        example_id: str | None,
        env: str | None,
    ) -> Page:
        direction = "DESC" if descending else "ASC"
        clauses: list[str] = []
        params: list[Any] = []
        if example_id:
            clauses.append("example_id = ?")
            params.append(example_id)
        if no_signal is not None:
            clauses.append("size > 1 AND low = high" if no_signal else "(size <= 1 OR low IS NULL OR low != high)")
        if env is not None:
            clause, values = self._env_clause(_GROUP_SQL["env"], env)
            clauses.append(clause)
            params.extend(values)
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        keys = QUERY_SPEC["groups"]["sorts"].get(sort, QUERY_SPEC["groups"]["sorts"]["order"])
        with _figures.snapshot(self._conn()):
            total = self._scalar(f"SELECT COUNT(*) FROM groups {where}", params) or 0
            rows = self._all(
                "SELECT group_id, example_id, example_idx, batch, step, size, reward_sum, reward_sq, low, high, failed,"
                f" {_GROUP_SQL['env']} FROM groups {where} ORDER BY {_order(_GROUP_SQL, keys, direction)},"
                f" group_id {direction} LIMIT ? OFFSET ?",
                [*params, limit, offset],
            )
        records = [{**_group_row(row[:-1]), "env": row[-1]} for row in rows]
        self._label_envs(records)
        self._add_short_ids(records)
        prompts = self._prompts([record["example_id"] for record in records])
        for record in records:
            record["prompt"] = prompts.get(record["example_id"], "")
        return Page(records, total, offset, limit)


def _order(columns: dict[str, str], keys: list[str], direction: str) -> str:
    """An ``ORDER BY`` over ``keys`` (mapped to their SQL by ``columns``): missing values last either way."""
    terms = []
    for key in keys:
        column = columns[key]
        terms.append(f"{column} IS NULL, {column} {direction}" if column in _NULLABLE else f"{column} {direction}")
    return ", ".join(terms)
