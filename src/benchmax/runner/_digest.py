"""SHA-256 of files, streamed, remembered by (path, size, mtime, inode) so a big dataset is hashed once.

The cache is one SQLite file under ``$BENCHMAX_CACHE_DIR`` (default
``$XDG_CACHE_HOME/benchmax``, else ``~/.cache/benchmax``). A file modified in the
last few seconds is hashed but not remembered: its mtime could still change
within the same tick without the size changing. Any trouble with the cache
(read-only home, a locked file) only costs the hashing, never the run.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from contextlib import suppress
from pathlib import Path

CACHE_FILE = "file-hashes.sqlite3"
_RACY_SECONDS = 3.0


def cache_dir() -> Path:
    """Where benchmax keeps caches of this machine."""
    configured = os.environ.get("BENCHMAX_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "benchmax"


class FileDigests:
    """Hashes files through the cache; use as a context manager (one connection for many files)."""

    def __init__(self, cache: Path | None = None) -> None:
        self._path = cache if cache is not None else cache_dir() / CACHE_FILE
        self._conn: sqlite3.Connection | None = None
        self.hashed = 0
        """Files read and hashed (cache misses) since this object was made."""

    def __enter__(self) -> FileDigests:
        with suppress(OSError, sqlite3.Error):
            self._path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._path, timeout=2, isolation_level=None)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS digests (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
                "inode INTEGER, sha256 TEXT)"
            )
            self._conn = conn
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def sha256(self, file: Path) -> str:
        """The file's SHA-256 hex digest (from the cache when the file is unchanged)."""
        path = Path(file).resolve()
        status = path.stat()
        key = (status.st_size, status.st_mtime_ns, status.st_ino)
        cached = self._lookup(str(path), key)
        if cached is not None:
            return cached
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        self.hashed += 1
        if time.time() - status.st_mtime_ns / 1e9 > _RACY_SECONDS:
            self._store(str(path), key, digest)
        return digest

    def _lookup(self, path: str, key: tuple[int, int, int]) -> str | None:
        if self._conn is None:
            return None
        try:
            row = self._conn.execute(
                "SELECT size, mtime_ns, inode, sha256 FROM digests WHERE path = ?", (path,)
            ).fetchone()
        except sqlite3.Error:
            return None
        return row[3] if row is not None and tuple(row[:3]) == key else None

    def _store(self, path: str, key: tuple[int, int, int], digest: str) -> None:
        if self._conn is None:
            return
        with suppress(sqlite3.Error):
            self._conn.execute(
                "INSERT INTO digests (path, size, mtime_ns, inode, sha256) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
                "inode = excluded.inode, sha256 = excluded.sha256",
                (path, *key, digest),
            )

