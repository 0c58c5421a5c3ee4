"""Pages and single items of one run, for the inspector.

Every table query returns one page and its total; nothing here loads a whole run
into memory. Whole-run figures come from ``_figures`` (cached here until the run
changes). The connection is read-only: the inspector may watch a run while the
runner is still writing it.

The tables are in ``_tables``, the single items in ``_items``, what the tables can
be filtered and sorted by in ``_query_spec`` (:data:`QUERY_SPEC`), text search in
``_search``; this module adds the run-level figures.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from benchmax.store import _figures, _kept, _overview, _run_stats
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._items import ItemQueries
from benchmax.store._meta import RunMeta
from benchmax.store._query_rows import _loads
from benchmax.store._search import search_words
from benchmax.store._suite import env_figures, suite_row
from benchmax.store._tables import TableQueries


class RunQueries(TableQueries, ItemQueries):
    """Read-only queries over one run's ``run.sqlite``.

    Each thread gets its own connection: the inspector answers requests from a
    thread pool, and a slow whole-run figure must not hold up a table page.
    Whole-run figures are cached until the run changes (new rollouts, a batch
    zero-fill, a metadata change), so a finished run computes them once.
    """

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
        return _overview.headline(self._conn())

    def _kept(self, name: str) -> Any | None:
        """Figures the writer kept in the file, while they still describe the run."""
        if self.layout < 2:
            return None
        conn = self._conn()
        with _figures.snapshot(conn):
            return _kept.kept(conn, name, _kept.data_stamp(conn))

    def overview(self, *, bins: int = _figures.DEFAULT_BINS) -> dict[str, Any]:
        """The run page's headline figures (:func:`benchmax.store._overview.overview`)."""

        def compute() -> dict[str, Any]:
            kept = self._kept("overview") if bins == _figures.DEFAULT_BINS else None
            if kept is not None and kept["pass_threshold"] == self._threshold():
                return kept
            return _overview.overview(self._conn(), bins=bins)

        return self._cached(f"overview:{bins}", compute)

    def distributions(self, *, bins: int = _figures.DEFAULT_BINS) -> dict[str, Any]:
        """Latency and token spreads, zero-fills, groups without learning signal."""

        def compute() -> dict[str, Any]:
            kept = self._kept("distributions") if bins == _figures.DEFAULT_BINS else None
            if kept is None:
                return _overview.distributions(self._conn(), self.run_meta(), bins=bins)
            totals = {"first_started_at": kept["first_started_at"], "last_ended_at": kept["last_ended_at"]}
            return {**kept, "wall_seconds": _figures.wall_seconds(self.run_meta(), totals)}

        return self._cached(f"distributions:{bins}", compute)

    def stats(self) -> _run_stats.RunStats:
        """The same figures as the CLI summary prints."""
        return self._cached("stats", lambda: _run_stats.run_stats(self._conn(), meta=self.run_meta()))

    def suite(self) -> list[dict[str, Any]]:
        """The run's figures per env (:meth:`Run.suite`'s rows as JSON): one row per env, its pass
        rate and each component's mean over that env's rollouts (never over the run)."""
        return self._cached(
            "suite", lambda: [suite_row(figures) for figures in env_figures(self._conn(), self._env_label())]
        )

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
