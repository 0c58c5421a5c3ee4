"""The inspector's whole-run figures as the writer keeps them in the file when it closes,
so a finished run's pages never recompute them; a stamp says whether they still describe the run."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from benchmax.store._figures import _one, _scalar
from benchmax.store._meta import RunMeta
from benchmax.store._overview import distributions, overview

CACHED = ("overview", "distributions")
"""The figures a writer keeps in the file when it closes (the inspector's two big calls)."""


def data_stamp(conn: sqlite3.Connection) -> str:
    """Changes whenever rollouts are added, replaced or zero-filled (metadata aside); cheap."""
    last = _scalar(conn, "SELECT MAX(seq) FROM rollouts", default=-1)
    batches = conn.execute("SELECT batch, rollouts, filled_rollouts FROM batches ORDER BY batch").fetchall()
    return orjson.dumps([_KEPT_VERSION, last, batches]).decode()


_KEPT_VERSION = 2
"""Bumped whenever the kept figures change shape: older kept figures are then recomputed."""


def kept(conn: sqlite3.Connection, name: str, stamp: str) -> Any | None:
    """The figures ``name`` as the writer kept them, if they still describe the run."""
    row = _one(conn, "SELECT stamp, value FROM figures WHERE name = ?", (name,))
    return orjson.loads(row[1]) if row is not None and row[0] == stamp else None


def keep(conn: sqlite3.Connection) -> None:
    """Compute the inspector's whole-run figures and keep them in the file (writer side)."""
    stamp = data_stamp(conn)
    if all(kept(conn, name, stamp) is not None for name in CACHED):
        return
    values = {"overview": overview(conn), "distributions": distributions(conn, RunMeta())}
    conn.executemany(
        "INSERT INTO figures (name, stamp, value) VALUES (?, ?, ?)"
        " ON CONFLICT (name) DO UPDATE SET stamp = excluded.stamp, value = excluded.value",
        [(name, stamp, orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()) for name, value in values.items()],
    )
