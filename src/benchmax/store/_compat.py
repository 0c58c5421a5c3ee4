"""Version-1 run files: read them as if they were current, and upgrade them for writing.

A reader must not write to a run (it may be someone else's, on read-only media,
or still being written), so a read-only connection to a version-1 file gets
temporary views under the current table names (SQLite resolves a name in the
``temp`` schema before ``main``). The views compute what version 2 stores
(group and example figures, integer-keyed rewards) on the fly, which is fine at
the sizes version 1 was used for. A writer that resumes a version-1 run
upgrades the file in place, in one transaction, so the run continues in the
current layout.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from benchmax.store import _codec, _schema
from benchmax.store._vocabulary import SCORABLE_SQL

_THRESHOLD = (
    "COALESCE((SELECT CASE WHEN json_type(value) IN ('integer', 'real') THEN json_extract(value, '$') END"
    " FROM main.meta WHERE key = 'pass_threshold'), 1.0)"
)
_SCORED = f"(scored OR termination_reason IN {SCORABLE_SQL})"


def _group_figures(rollouts: str, scored: str) -> str:
    """Per-group figures (as stored by version 2) aggregated from a rollouts table."""
    return (
        "SELECT group_id, MIN(seq) AS first_seq, MAX(seq) AS last_seq, COUNT(*) AS n,"
        f" SUM(NOT {scored}) AS failed, SUM(COALESCE(reward, 0)) AS reward_sum,"
        " SUM(COALESCE(reward, 0) * COALESCE(reward, 0)) AS reward_sq,"
        " MIN(COALESCE(reward, 0)) AS low, MAX(COALESCE(reward, 0)) AS high,"
        " SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens,"
        " SUM(num_turns) AS turns, SUM(num_tool_calls) AS tool_calls, SUM(seconds) AS seconds,"
        " MIN(started_at) AS first_started_at, MAX(ended_at) AS last_ended_at,"
        f" SUM(COALESCE(reward, 0) >= {_THRESHOLD}) AS passed"
        f" FROM {rollouts} GROUP BY group_id"
    )


_GROUP_COLUMNS = (
    "g.group_id, g.example_id, g.example_idx, g.batch, g.step, g.size, g.started_at, g.ended_at, g.logs,"
    " f.first_seq, f.last_seq, f.failed, f.reward_sum, f.reward_sq, f.low, f.high, f.prompt_tokens,"
    " f.completion_tokens, f.turns, f.tool_calls, f.seconds, f.first_started_at, f.last_ended_at"
)

_READ_VIEWS = [
    "CREATE TEMP VIEW rollouts AS SELECT seq, rollout_id, group_id, example_id, sample_index, step, batch, split,"
    f" termination_reason, error, {_SCORED} AS scored, reward, prompt_tokens, completion_tokens, num_turns,"
    " num_tool_calls, started_at, ended_at, seconds, final_text, NULL AS trace_id FROM main.rollouts",
    "CREATE TEMP VIEW transcripts AS SELECT seq, messages, turns, sampling FROM main.rollouts",
    "CREATE TEMP VIEW rewards AS SELECT r.seq AS seq, w.component AS component, w.value AS value,"
    " w.filled AS filled FROM main.rewards AS w JOIN main.rollouts AS r ON r.rollout_id = w.rollout_id",
    "CREATE TEMP VIEW reward_rows AS SELECT rollout_id, component, value, filled FROM main.rewards",
    f"CREATE TEMP VIEW v1_group_figures AS {_group_figures('main.rollouts', _SCORED)}",
    f"CREATE TEMP VIEW groups AS SELECT g.rowid AS group_seq, {_GROUP_COLUMNS}"
    " FROM main.groups AS g JOIN temp.v1_group_figures AS f ON f.group_id = g.group_id",
    "CREATE TEMP VIEW example_figures AS SELECT g.example_id AS example_id, MIN(g.example_idx) AS idx,"
    " SUM(f.n) AS rollouts, SUM(f.failed) AS failed, SUM(f.passed) AS passed, SUM(f.reward_sum) AS reward_sum,"
    " COUNT(*) AS groups FROM main.groups AS g JOIN temp.v1_group_figures AS f ON f.group_id = g.group_id"
    " GROUP BY g.example_id",
    "CREATE TEMP VIEW example_components AS SELECT r.example_id AS example_id, w.component AS component,"
    " SUM(w.value) AS value_sum, COUNT(*) AS count FROM main.rewards AS w JOIN main.rollouts AS r"
    " ON r.rollout_id = w.rollout_id GROUP BY r.example_id, w.component",
    "CREATE TEMP VIEW batches AS SELECT batch, COUNT(*) AS rollouts, COUNT(*) AS filled_rollouts"
    " FROM main.rollouts GROUP BY batch",
    "CREATE TEMP VIEW batch_components AS SELECT DISTINCT r.batch AS batch, w.component AS component"
    " FROM main.rewards AS w JOIN main.rollouts AS r ON r.rollout_id = w.rollout_id WHERE w.filled = 0",
]


def present_v1(conn: sqlite3.Connection) -> None:
    """Give a read-only connection to a version-1 file the current table names."""
    for statement in _READ_VIEWS:
        conn.execute(statement)


def upgrade_v1(conn: sqlite3.Connection) -> None:
    """Rewrite a version-1 file in the current layout, in one transaction.

    Rollouts are renumbered so each group's are consecutive (version 1 did so
    too, unless a group was written twice); transcripts are compressed and indexed
    for search; zero-fills are kept and every batch is marked for a refill check.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for index in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN"
            " ('rollouts', 'groups', 'rewards')"
        ).fetchall():
            conn.execute(f'DROP INDEX "{index[0]}"')
        for table in ("rollouts", "groups", "rewards"):
            conn.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
        for statement in _schema.SCHEMA.split(";\n"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "CREATE TEMP TABLE v1_order AS SELECT r.rollout_id AS rollout_id,"
            " ROW_NUMBER() OVER (ORDER BY m.first, r.group_id, r.sample_index, r.seq) - 1 AS seq"
            " FROM v1_rollouts AS r JOIN (SELECT group_id, MIN(seq) AS first FROM v1_rollouts GROUP BY group_id)"
            " AS m ON m.group_id = r.group_id"
        )
        conn.execute("CREATE INDEX temp.v1_order_by_id ON v1_order (rollout_id)")
        conn.execute(
            "INSERT INTO rollouts SELECT o.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step,"
            f" r.batch, r.split, r.termination_reason, r.error, (r.scored OR r.termination_reason IN {SCORABLE_SQL}),"
            " r.reward, r.prompt_tokens, r.completion_tokens, r.num_turns, r.num_tool_calls, r.started_at,"
            " r.ended_at, r.seconds, r.final_text, NULL FROM v1_rollouts AS r JOIN v1_order AS o"
            " ON o.rollout_id = r.rollout_id ORDER BY o.seq"
        )
        _copy_transcripts(conn)
        conn.execute(
            "INSERT INTO rewards SELECT o.seq, w.component, w.value, w.filled FROM v1_rewards AS w"
            " JOIN v1_order AS o ON o.rollout_id = w.rollout_id"
        )
        conn.execute(
            "INSERT INTO groups (group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs,"
            " first_seq, last_seq, failed, reward_sum, reward_sq, low, high, prompt_tokens, completion_tokens,"
            f" turns, tool_calls, seconds, first_started_at, last_ended_at) SELECT {_GROUP_COLUMNS}"
            f" FROM v1_groups AS g JOIN ({_group_figures('rollouts', 'scored')}) AS f ON f.group_id = g.group_id"
            " ORDER BY f.first_seq"
        )
        conn.execute(
            "INSERT INTO example_figures SELECT g.example_id, MIN(g.example_idx), COUNT(*), SUM(r.scored = 0),"
            f" SUM(COALESCE(r.reward, 0) >= {_THRESHOLD}), SUM(COALESCE(r.reward, 0)), COUNT(DISTINCT g.group_id)"
            " FROM groups AS g JOIN rollouts AS r ON r.seq BETWEEN g.first_seq AND g.last_seq GROUP BY g.example_id"
        )
        conn.execute("INSERT INTO batches SELECT batch, SUM(size), NULL FROM groups GROUP BY batch")
        conn.execute(
            "INSERT INTO example_components SELECT g.example_id, w.component, SUM(w.value), COUNT(*) FROM groups AS g"
            " JOIN rewards AS w ON w.seq BETWEEN g.first_seq AND g.last_seq GROUP BY g.example_id, w.component"
        )
        conn.execute(
            "INSERT INTO batch_components SELECT DISTINCT g.batch, w.component FROM groups AS g"
            " JOIN rewards AS w ON w.seq BETWEEN g.first_seq AND g.last_seq WHERE w.filled = 0"
        )
        for table in ("v1_rollouts", "v1_groups", "v1_rewards"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP TABLE temp.v1_order")
        _schema.ensure_rollout_indexes(conn)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(_schema.SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _copy_transcripts(conn: sqlite3.Connection) -> None:
    _copy_rows(
        conn,
        "SELECT o.seq, r.messages, r.turns, r.sampling, r.final_text, r.error, r.rollout_id, r.example_id"
        " FROM v1_rollouts AS r JOIN v1_order AS o ON o.rollout_id = r.rollout_id ORDER BY o.seq",
    )


def copy_v1_transcripts(conn: sqlite3.Connection, schema: str) -> None:
    """Compress and index the transcripts of the version-1 run attached as ``schema``, keeping its numbers."""
    _copy_rows(
        conn,
        "SELECT seq, messages, turns, sampling, final_text, error, rollout_id, example_id"
        f" FROM {schema}.rollouts ORDER BY seq",
    )


def _copy_rows(conn: sqlite3.Connection, select: str) -> None:
    cursor = conn.execute(select)
    while rows := cursor.fetchmany(1000):
        transcripts: list[tuple[Any, ...]] = []
        search: list[tuple[Any, ...]] = []
        for seq, messages, turns, sampling, final_text, error, rollout_id, example_id in rows:
            transcripts.append(
                (
                    seq,
                    _codec.pack_json(messages.encode()),
                    _codec.pack_json(turns.encode()),
                    _codec.pack_json(sampling.encode()) if sampling else None,
                )
            )
            text = _codec.search_text(_codec.decode(messages) or [])
            search.append((seq, final_text, error or "", text, f"{rollout_id} {example_id}"))
        conn.executemany("INSERT INTO transcripts VALUES (?, ?, ?, ?)", transcripts)
        conn.executemany(
            "INSERT INTO rollouts_fts (rowid, answer, error, transcript, ids) VALUES (?, ?, ?, ?, ?)", search
        )


_EXAMPLES_WITHOUT_ENV = (
    "CREATE TEMP VIEW examples AS SELECT example_id, idx, split, payload, NULL AS env FROM main.examples"
)


def connect_reader(db: Path, *, mapped: bool = True) -> tuple[sqlite3.Connection, int]:
    """The one way a reader opens a run file of any layout it supports: read-only, and
    with the current table names and columns (a version-1 file gets its views, a file
    written before ``examples.env`` a view adding it as ``NULL``). Returns the
    connection and the file's layout version.

    ``bmx_json(value)`` is registered on the connection, so SQL over ``transcripts``
    can read the compressed JSON: ``SELECT bmx_json(messages) FROM transcripts``.
    """
    conn = _schema.connect(db, readonly=True)
    try:
        if mapped:
            conn.execute(f"PRAGMA mmap_size={_schema.READER_MMAP_BYTES}")
        found = _schema.check_readable(conn, db)
        if found == 1:
            present_v1(conn)
        elif found and not _schema.has_trace_ids(conn):
            # written before rollouts were traced: read with the column, NULL (a view; the file is not touched)
            conn.execute("CREATE TEMP VIEW rollouts AS SELECT *, NULL AS trace_id FROM main.rollouts")
        if not _schema.has_example_env(conn):
            # a file written before examples.env: every example of it is of the run's one env
            conn.execute(_EXAMPLES_WITHOUT_ENV)
        conn.create_function("bmx_json", 1, _json_text, deterministic=True)
    except BaseException:
        conn.close()
        raise
    return conn, found


def _json_text(value: bytes | str | None) -> str | None:
    text = _codec.unpack_json(value)
    return None if text is None else text.decode()
