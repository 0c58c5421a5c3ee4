"""The run store's SQLite schema: one file per run directory, WAL journal.

Raw rewards live one row per component in ``rewards`` (``filled = 0``); the
batch zero-fill adds rows with ``filled = 1`` when a batch closes, so raw and
filled values are both kept and a trainer can mask fills out. JSON columns
hold what is only ever read whole (transcripts, turns, logs of a group hook,
a training step's metrics in ``steps``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal, TypeAlias

RunStatus: TypeAlias = Literal["running", "completed", "failed", "interrupted"]
"""Where a run stands; the run session sets it on every way out."""
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "completed", "failed", "interrupted")

SCHEMA_VERSION = 1
DB_NAME = "run.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS examples (
    example_id TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    split TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY,
    example_id TEXT NOT NULL,
    example_idx INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    step INTEGER,
    size INTEGER NOT NULL,
    started_at REAL,
    ended_at REAL,
    logs TEXT
);
CREATE INDEX IF NOT EXISTS groups_by_example ON groups (example_id);
CREATE INDEX IF NOT EXISTS groups_by_batch ON groups (batch);
CREATE TABLE IF NOT EXISTS rollouts (
    rollout_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    group_id TEXT NOT NULL REFERENCES groups (group_id),
    example_id TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    step INTEGER,
    batch INTEGER NOT NULL,
    split TEXT NOT NULL,
    termination_reason TEXT NOT NULL,
    error TEXT,
    scored INTEGER NOT NULL,
    reward REAL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    num_turns INTEGER NOT NULL,
    num_tool_calls INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    seconds REAL NOT NULL,
    final_text TEXT NOT NULL,
    messages TEXT NOT NULL,
    turns TEXT NOT NULL,
    sampling TEXT
);
CREATE INDEX IF NOT EXISTS rollouts_by_group ON rollouts (group_id);
CREATE INDEX IF NOT EXISTS rollouts_by_example ON rollouts (example_id);
CREATE INDEX IF NOT EXISTS rollouts_by_reason ON rollouts (termination_reason);
CREATE INDEX IF NOT EXISTS rollouts_by_reward ON rollouts (reward);
CREATE INDEX IF NOT EXISTS rollouts_by_seq ON rollouts (seq);
CREATE TABLE IF NOT EXISTS rewards (
    rollout_id TEXT NOT NULL REFERENCES rollouts (rollout_id),
    component TEXT NOT NULL,
    value REAL NOT NULL,
    filled INTEGER NOT NULL,
    PRIMARY KEY (rollout_id, component)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rewards_by_component ON rewards (component, value, filled);
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY,
    rollout_id TEXT,
    group_id TEXT NOT NULL,
    time REAL NOT NULL,
    level TEXT NOT NULL,
    levelno INTEGER NOT NULL,
    logger TEXT NOT NULL,
    message TEXT NOT NULL,
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    phase TEXT NOT NULL,
    traceback TEXT
);
CREATE INDEX IF NOT EXISTS logs_by_rollout ON logs (rollout_id);
CREATE INDEX IF NOT EXISTS logs_by_group ON logs (group_id);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    metrics TEXT NOT NULL
);
"""


def locate(path: str | Path) -> Path:
    """The database of a run directory (or the database file itself), which must exist."""
    path = Path(path)
    db = path / DB_NAME if path.is_dir() else path
    if not db.exists():
        raise FileNotFoundError(f"no benchmax run at {path} ({DB_NAME} not found)")
    return db


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the run database with the pragmas every reader and writer relies on."""
    if readonly:
        uri = f"{path.resolve().as_uri()}?mode=ro"  # percent-encoded: a '?' or '#' in the path stays in it
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    else:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA foreign_keys=OFF")
    return conn


def create(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
    )
