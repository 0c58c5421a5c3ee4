"""The writer's connection discipline: one transaction at a time on a shared connection."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any


def _threshold(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1.0


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
