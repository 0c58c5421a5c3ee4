"""The inspector's run page and runs list read what does not grow with the run: every statement the
overview, the per-env figures and a runs list's line run is planned by SQLite (``EXPLAIN QUERY
PLAN``) as lookups in an index or reads of the small summary tables, never a pass over the
rollouts, groups or examples. A guard without timing: the next feature that adds a scan fails here."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_store_env_totals import _mixture_writer, _write
from test_store_envs import suite_run  # noqa: F401  (the fixture: a real eval of a mixture of two envs)

from benchmax.inspector.app import run_overview
from benchmax.inspector.catalog import RunCatalog
from benchmax.store import RunQueries

SMALL = {
    "meta", "batches", "batch_components", "figures", "env_totals", "env_components", "CONSTANT ROW", "sqlite_master",
    "main.sqlite_master",
}  # fmt: skip
"""Tables whose size does not grow with the rollouts (a row per batch at most), and SQLite's own."""

_SCAN = re.compile(r"^SCAN (?:TABLE )?(.+?)(?: USING .*)?$")


def _traced(run: RunQueries, call: Callable[[], Any]) -> list[str]:
    """The statements ``call`` runs on the reader's connection, as SQLite ran them (values inlined)."""
    statements: list[str] = []
    conn = run._conn()
    conn.set_trace_callback(statements.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return [sql for sql in statements if sql.lstrip().upper().startswith(("SELECT", "WITH"))]


def _scans(db: Path, statements: list[str]) -> list[tuple[str, str]]:
    """Each (statement, plan line) that scans a table other than the small ones."""
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        found = []
        for sql in statements:
            for *_, detail in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall():
                match = _SCAN.match(detail)
                if match and match.group(1) not in SMALL:
                    found.append((sql, detail))
        return found
    finally:
        conn.close()


def _catalog_call(run_dir: Path) -> tuple[RunQueries, Callable[[], Any], Callable[[], Any]]:
    catalog = RunCatalog(run_dir)
    run_id = next(iter(catalog.runs()))
    run = catalog.get(run_id)
    return run, lambda: run_overview(run, run_id, catalog), lambda: run.headline()


@pytest.mark.parametrize("call", ["overview", "runs list line", "per-env figures"])
def test_a_finished_runs_page_calls_scan_nothing_that_grows_with_the_run(suite_run, call):  # noqa: F811
    run, overview, headline = _catalog_call(suite_run)
    action = {"overview": overview, "runs list line": headline, "per-env figures": run.suite}[call]
    statements = _traced(run, action)

    assert statements, "the call read the store"
    assert _scans(suite_run / "run.sqlite", statements) == []
    assert {row["env"] for row in run.suite()} == {"math", "code"}
    run.close()


def test_the_per_env_figures_of_a_run_being_written_scan_nothing_that_grows(tmp_path):
    writer = _mixture_writer(tmp_path / "run")
    for position in range(3):
        _write(writer, position, f"math/{position}", [{"exact": 1.0}, {"exact": 0.0}])
        _write(writer, 3 + position, f"code/{position}", [{"tests": 1.0}, {"tests": 1.0}])
    writer.flush()
    run = RunQueries(tmp_path / "run")
    try:
        statements = _traced(run, run.suite)
        assert _scans(tmp_path / "run" / "run.sqlite", statements) == []
        assert {row["env"]: row["rollouts"] for row in run.suite()} == {"math": 6, "code": 6}
    finally:
        run.close()
        writer.close()


def test_the_guard_sees_a_scan_of_the_rollouts(suite_run):  # noqa: F811
    """The check itself: a statement that passes over every rollout is caught."""
    statements = ["SELECT termination_reason, COUNT(*) FROM rollouts GROUP BY termination_reason",
                  "SELECT SUM(rollouts) FROM example_figures AS f"]  # fmt: skip
    assert [detail for _, detail in _scans(suite_run / "run.sqlite", statements)] == [
        "SCAN rollouts USING COVERING INDEX rollouts_by_reason",
        "SCAN f",
    ]
