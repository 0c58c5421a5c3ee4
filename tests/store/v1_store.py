"""Version-1 run files (benchmax 0.3.0's first store layout), made from a current run for the tests.

The layout below is version 1's, frozen; the rows are those of a current run,
written the way version 1 wrote them (transcripts as plain JSON in ``rollouts``,
rewards keyed by rollout id, ``scored`` as "has any reward").
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from benchmax.store import DB_NAME, Run

V1_SCHEMA = """
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
"""


def downgrade(source: Path, target: Path) -> Path:
    """Write the run at ``source`` as a version-1 file at ``target`` (a new run directory)."""
    target.mkdir(parents=True)
    conn = sqlite3.connect(target / DB_NAME)
    conn.executescript(V1_SCHEMA)
    with Run(source) as run:
        meta = run.sql("SELECT key, value FROM meta WHERE key != 'schema_version'")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), *meta])
        conn.executemany(
            "INSERT INTO examples VALUES (?, ?, ?, ?)", run.sql("SELECT example_id, idx, split, payload FROM examples")
        )
        conn.executemany(
            "INSERT INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            run.sql(
                "SELECT group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs FROM groups"
            ),
        )
        rows = run.sql(
            "SELECT r.rollout_id, r.seq, r.group_id, r.example_id, r.sample_index, r.step, r.batch, r.split,"
            " r.termination_reason, r.error, EXISTS (SELECT 1 FROM rewards AS w WHERE w.seq = r.seq AND w.filled = 0),"
            " r.reward, r.prompt_tokens, r.completion_tokens, r.num_turns, r.num_tool_calls, r.started_at, r.ended_at,"
            " r.seconds, r.final_text, bmx_json(t.messages), bmx_json(t.turns), bmx_json(t.sampling)"
            " FROM rollouts AS r JOIN transcripts AS t ON t.seq = r.seq ORDER BY r.seq"
        )
        conn.executemany(f"INSERT INTO rollouts VALUES ({', '.join('?' * 23)})", rows)
        conn.executemany("INSERT INTO rewards VALUES (?, ?, ?, ?)", run.sql("SELECT * FROM reward_rows"))
        conn.executemany(
            "INSERT INTO logs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run.sql("SELECT * FROM logs ORDER BY id")
        )
    conn.commit()
    conn.close()
    return target
