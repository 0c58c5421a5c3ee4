"""The run store's SQLite layout (version 2): one file per run directory, WAL journal.

Laid out for runs of millions of rollouts:

* ``rollouts`` holds the small, hot columns every table page, filter and figure
  reads; the transcripts (messages, turns, sampling) live apart in
  ``transcripts``, compressed (see ``_codec``), so a pass over the rollouts
  reads a few hundred bytes a row instead of the whole conversation.
* A group's rollouts get consecutive ``seq`` numbers (they are written in one
  transaction), so ``groups.first_seq``/``last_seq`` find them without an index
  over text ids, and rewards are keyed by that integer ``seq``.
* ``groups`` and ``example_figures`` carry the per-group and per-example figures
  the writer computes as each group lands (sizes, failures, reward sums and
  spread), so the no-signal count, the groups table and the pass rate per
  example never aggregate every rollout; ``example_components`` holds each
  example's sum and count per component (after the zero-fill), for comparisons.
* ``figures`` keeps the whole-run figures (``_kept``) the writer computed when it
  closed, with the state of the run they describe, so a finished run's inspector
  opens without a pass over it;
* ``rollouts_fts`` is a contentless FTS5 index of each rollout's text, filled
  in the same transaction as its rollout.
* ``rollout_costs`` holds what each rollout's model calls cost, when the run
  counted them (an eval does): dollars (``NULL``: unknown, a model without a
  price), requests sent, replies from the response cache, and the calls per
  role (policy, judge) and model as JSON. Added to layout 2 later: a file
  written before has no such table until a writer resumes it.
* Raw rewards are rows with ``filled = 0``; the batch zero-fill adds rows with
  ``filled = 1``, so raw and filled values are both kept and a trainer can mask
  fills out. ``batches`` records what each batch's last zero-fill covered, so a
  resumed run refills only what changed.
* ``turn_rewards`` holds, per rollout and component, the sum of the rewards its env gave
  turn by turn (``TurnRecord.rewards``, from ``env_response``) and how many turns gave one;
  rollouts without turn rewards have no rows. The turns themselves stay in ``transcripts``.
  Added to layout 2 later: a file written before has no such table until a writer resumes it,
  and a reader of one sees no turn rewards.
* ``steps`` holds a training run's per-step metrics (JSON, read whole), one row a step.
* ``sampler_states`` holds a curriculum's state (JSON) after each step generated, so a resumed
  training run continues the same curriculum. Added to layout 2 later: a file written before
  has no such table until a writer resumes it.
* ``examples.env`` names the env of each example in a run of several envs (a mixture;
  ``NULL`` in a run of one env, whose env the run's metadata names). Every per-env
  figure and the zero-fill key on it through the example. Added to layout 2 later: a
  writer resuming an older file adds the column; a reader of one sees ``NULL``
  (:func:`benchmax.store._compat.connect_reader`).
* ``env_totals`` and ``env_components`` hold each env's sums of the per-example and per-group
  figures (rollouts, failures, passes, groups with and without signal; each component's sum
  and count), kept by triggers on ``example_figures``, ``example_components`` and ``groups``,
  so every way a figure changes (a group written, filled, replaced, rescored) keeps them, and
  a run's per-env figures read a few rows instead of every example. The run's own env (a run
  of one env, or examples of no named env) is the key ``''``. Added to layout 2 later: a writer
  opening an older file builds them from its figures (:func:`ensure_env_totals`); a reader of
  one that lacks them computes the same figures from the per-example ones.

Version 1 files (benchmax 0.3.0's first layout) stay readable: ``_compat``
presents them under these names to a read-only connection, and a writer that
resumes one migrates it in place first.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from benchmax.errors import BenchmaxError

SCHEMA_VERSION = 2
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
    payload TEXT NOT NULL,
    env TEXT
);
CREATE INDEX IF NOT EXISTS examples_by_position ON examples (idx, example_id);
CREATE TABLE IF NOT EXISTS groups (
    group_seq INTEGER PRIMARY KEY,
    group_id TEXT NOT NULL UNIQUE,
    example_id TEXT NOT NULL,
    example_idx INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    step INTEGER,
    size INTEGER NOT NULL,
    started_at REAL,
    ended_at REAL,
    logs TEXT,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    reward_sum REAL NOT NULL,
    reward_sq REAL NOT NULL,
    low REAL,
    high REAL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    seconds REAL NOT NULL,
    first_started_at REAL,
    last_ended_at REAL
);
CREATE INDEX IF NOT EXISTS groups_by_example ON groups (example_id);
CREATE INDEX IF NOT EXISTS groups_by_position ON groups (example_idx, step, group_id);
CREATE INDEX IF NOT EXISTS groups_by_batch ON groups (batch);
CREATE INDEX IF NOT EXISTS groups_no_signal ON groups (example_idx, step) WHERE size > 1 AND low = high;
CREATE TABLE IF NOT EXISTS example_figures (
    example_id TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    rollouts INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    reward_sum REAL NOT NULL,
    groups INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS example_components (
    example_id TEXT NOT NULL,
    component TEXT NOT NULL,
    value_sum REAL NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (example_id, component)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollouts (
    seq INTEGER PRIMARY KEY,
    rollout_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
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
    trace_id TEXT
);
CREATE TABLE IF NOT EXISTS transcripts (
    seq INTEGER PRIMARY KEY,
    messages BLOB NOT NULL,
    turns BLOB NOT NULL,
    sampling BLOB
);
CREATE TABLE IF NOT EXISTS rollout_costs (
    seq INTEGER PRIMARY KEY,
    usd REAL,
    requests INTEGER NOT NULL,
    cache_hits INTEGER NOT NULL,
    calls TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turn_rewards (
    seq INTEGER NOT NULL,
    component TEXT NOT NULL,
    value_sum REAL NOT NULL,
    turns INTEGER NOT NULL,
    PRIMARY KEY (seq, component)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rewards (
    seq INTEGER NOT NULL,
    component TEXT NOT NULL,
    value REAL NOT NULL,
    filled INTEGER NOT NULL,
    PRIMARY KEY (seq, component)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rewards_by_component ON rewards (component, value, seq, filled);
CREATE TABLE IF NOT EXISTS figures (
    name TEXT PRIMARY KEY,
    stamp TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    batch INTEGER PRIMARY KEY,
    rollouts INTEGER NOT NULL,
    filled_rollouts INTEGER
);
CREATE TABLE IF NOT EXISTS batch_components (
    batch INTEGER NOT NULL,
    component TEXT NOT NULL,
    PRIMARY KEY (batch, component)
) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS sampler_states (
    step INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    state TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS rollouts_fts USING fts5 (
    answer, error, transcript, ids,
    content = '', columnsize = 0, detail = column,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIEW IF NOT EXISTS reward_rows AS
    SELECT r.rollout_id AS rollout_id, w.component AS component, w.value AS value, w.filled AS filled
    FROM rewards AS w JOIN rollouts AS r ON r.seq = w.seq;
"""
"""``reward_rows`` keeps version 1's shape of the rewards (keyed by rollout id) for SQL users."""

_ROLLOUT_INDEXES = {
    "rollouts_by_id": "CREATE UNIQUE INDEX IF NOT EXISTS rollouts_by_id ON rollouts (rollout_id)",
    "rollouts_by_reason": "CREATE INDEX IF NOT EXISTS rollouts_by_reason ON rollouts (termination_reason, scored)",
    "rollouts_by_reward": "CREATE INDEX IF NOT EXISTS rollouts_by_reward ON rollouts (reward)",
    "rollouts_by_seconds": "CREATE INDEX IF NOT EXISTS rollouts_by_seconds ON rollouts (seconds)",
    "rollouts_by_completion": "CREATE INDEX IF NOT EXISTS rollouts_by_completion ON rollouts (completion_tokens)",
    "rollouts_failed_by_seq": "CREATE INDEX IF NOT EXISTS rollouts_failed_by_seq ON rollouts (seq) WHERE scored = 0",
}
"""The indexes of ``rollouts``, kept apart from ``SCHEMA`` so a bulk copy can build them once at
its end (a sort) instead of row by row: a rescore's random 64-digit rollout ids made each insert
touch a random index page, about 5x the cost of the insert itself. Files written before
``rollouts_by_id`` existed enforce the same uniqueness with a column constraint."""

WRITER_CACHE_KIB = 32 * 1024
"""The writer's page cache: the text-keyed indexes of a million-rollout run stay in it."""

WRITER_CHECKPOINT_PAGES = 16384
"""Pages the WAL may hold before a commit copies them into the file (SQLite's default: 1,000).
A run's per-example figures are keyed by hashed ids, so each commit dirties pages all over
the file; checkpointing 16x less often writes each of them once per checkpoint instead of
once per commit: a rescore of 200k rollouts ran 1.5x faster."""

READER_MMAP_BYTES = 1 << 30
"""Readers map the file: passes over a big run read pages without a system call and a copy
per page (an export runs ~3x faster). Mapped pages count in a process's RSS while it
reads them, but they are the file's page cache, not the process's memory."""


class SchemaError(BenchmaxError, RuntimeError):
    """The file is a run store of a layout this version cannot read."""


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
        # a URI connection, so the ATTACH of another run (read-only, by URI) works on any SQLite build
        uri = path.resolve().as_uri()
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
        conn.execute(f"PRAGMA wal_autocheckpoint={WRITER_CHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WRITER_CHECKPOINT_PAGES * 4096}")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA foreign_keys=OFF")
    return conn


def version(conn: sqlite3.Connection) -> int:
    """The layout version of an open store: 0 for a file with no tables yet."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if _has(conn, "meta") else None
    if row is not None:
        return int(row[0])
    return 1 if _has(conn, "rollouts") else 0


def create(conn: sqlite3.Connection) -> None:
    """Lay out an empty file as the current version (a no-op on a current file).

    Also rebuilds the rollout indexes a bulk copy dropped and never restored (it was killed)."""
    conn.executescript(SCHEMA)
    if not has_trace_ids(conn):  # a file written before rollouts were traced: the column is added, NULL for them
        conn.execute("ALTER TABLE rollouts ADD COLUMN trace_id TEXT")
    ensure_example_env(conn)
    ensure_rollout_indexes(conn)
    ensure_env_totals(conn)
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


ENV_OF_NEW = "COALESCE((SELECT env FROM examples WHERE example_id = NEW.example_id), '')"
ENV_OF_OLD = "COALESCE((SELECT env FROM examples WHERE example_id = OLD.example_id), '')"

ENV_TOTALS_TABLES = """
CREATE TABLE env_totals (
    env TEXT PRIMARY KEY,
    rollouts INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    passed INTEGER NOT NULL DEFAULT 0,
    groups INTEGER NOT NULL DEFAULT 0,
    groups_with_signal INTEGER NOT NULL DEFAULT 0,
    groups_no_signal INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE env_components (
    env TEXT NOT NULL,
    component TEXT NOT NULL,
    value_sum REAL NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (env, component)
) WITHOUT ROWID;
"""


def _env_trigger(name: str, event: str, table: str, target: str, columns: dict[str, str], row: str) -> str:
    """A trigger adding ``columns`` (name: expression over ``NEW``/``OLD``) to ``target``'s row
    of the env of ``row``."""
    keys = "env, component" if target == "env_components" else "env"
    env = ENV_OF_NEW if row == "NEW" else ENV_OF_OLD
    values = ", ".join(columns.values())
    key_values = f"{env}, {row}.component" if target == "env_components" else env
    updates = ", ".join(f"{column} = {column} + excluded.{column}" for column in columns)
    return (
        f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN "
        f"INSERT INTO {target} ({keys}, {', '.join(columns)}) VALUES ({key_values}, {values}) "
        f"ON CONFLICT ({keys}) DO UPDATE SET {updates}; END"
    )


def _env_triggers() -> list[str]:
    figures = ("rollouts", "failed", "passed")
    signal = "COALESCE({row}.size > 1 AND {row}.low < {row}.high, 0)"
    none = "COALESCE({row}.size > 1 AND {row}.low = {row}.high, 0)"
    triggers = [
        _env_trigger("env_totals_figures_in", "INSERT", "example_figures", "env_totals",
                     {c: f"NEW.{c}" for c in figures}, "NEW"),
        _env_trigger("env_totals_figures_out", "DELETE", "example_figures", "env_totals",
                     {c: f"-OLD.{c}" for c in figures}, "OLD"),
        _env_trigger("env_totals_figures_change", "UPDATE", "example_figures", "env_totals",
                     {c: f"NEW.{c} - OLD.{c}" for c in figures}, "NEW"),
        _env_trigger("env_totals_groups_in", "INSERT", "groups", "env_totals",
                     {"groups": "1", "groups_with_signal": signal.format(row="NEW"),
                      "groups_no_signal": none.format(row="NEW")}, "NEW"),
        _env_trigger("env_totals_groups_out", "DELETE", "groups", "env_totals",
                     {"groups": "-1", "groups_with_signal": "-" + signal.format(row="OLD"),
                      "groups_no_signal": "-" + none.format(row="OLD")}, "OLD"),
        _env_trigger("env_totals_groups_change", "UPDATE OF size, low, high", "groups", "env_totals",
                     {"groups_with_signal": f"{signal.format(row='NEW')} - {signal.format(row='OLD')}",
                      "groups_no_signal": f"{none.format(row='NEW')} - {none.format(row='OLD')}"}, "NEW"),
        _env_trigger("env_components_in", "INSERT", "example_components", "env_components",
                     {"value_sum": "NEW.value_sum", "count": "NEW.count"}, "NEW"),
        _env_trigger("env_components_out", "DELETE", "example_components", "env_components",
                     {"value_sum": "-OLD.value_sum", "count": "-OLD.count"}, "OLD"),
        _env_trigger("env_components_change", "UPDATE", "example_components", "env_components",
                     {"value_sum": "NEW.value_sum - OLD.value_sum", "count": "NEW.count - OLD.count"}, "NEW"),
    ]  # fmt: skip
    return triggers


def has_env_totals(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether ``schema`` keeps the per-env sums (files written before them do not)."""
    found = conn.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = 'env_totals'")
    return found.fetchone() is not None


def ensure_env_totals(conn: sqlite3.Connection) -> None:
    """Give a file the per-env sums and the triggers that keep them, built from its figures
    in one transaction (a file written before them; a no-op on one that has them)."""
    if has_env_totals(conn):
        return
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN IMMEDIATE")
    try:
        if not has_env_totals(conn):  # another writer may have built them meanwhile
            for statement in ENV_TOTALS_TABLES.split(";"):
                if statement.strip():
                    conn.execute(statement)
            env = "COALESCE(e.env, '')"
            conn.execute(
                f"INSERT INTO env_totals (env, rollouts, failed, passed) SELECT {env}, SUM(f.rollouts),"
                " SUM(f.failed), SUM(f.passed) FROM example_figures AS f"
                " LEFT JOIN examples AS e ON e.example_id = f.example_id GROUP BY 1"
            )
            conn.execute(
                f"INSERT INTO env_totals (env, groups, groups_with_signal, groups_no_signal) SELECT {env}, COUNT(*),"
                " COALESCE(SUM(g.size > 1 AND g.low < g.high), 0), COALESCE(SUM(g.size > 1 AND g.low = g.high), 0)"
                " FROM groups AS g LEFT JOIN examples AS e ON e.example_id = g.example_id WHERE true GROUP BY 1"
                " ON CONFLICT (env) DO UPDATE SET groups = excluded.groups,"
                " groups_with_signal = excluded.groups_with_signal, groups_no_signal = excluded.groups_no_signal"
            )
            conn.execute(
                f"INSERT INTO env_components (env, component, value_sum, count) SELECT {env}, c.component,"
                " SUM(c.value_sum), SUM(c.count) FROM example_components AS c"
                " LEFT JOIN examples AS e ON e.example_id = c.example_id GROUP BY 1, 2"
            )
            for trigger in _env_triggers():
                conn.execute(trigger)
        if began:
            conn.execute("COMMIT")
    except BaseException:
        if began:
            conn.execute("ROLLBACK")
        raise
def example_env(alias: str) -> str:
    """The one way the store names a row's env in SQL: its example's ``env``, for ``alias`` (a table
    with an ``example_id`` column). ``NULL`` in a run of one env, whose rows readers name by the
    run's own env (:func:`benchmax.store._meta.labelled`)."""
    return f"(SELECT e.env FROM examples AS e WHERE e.example_id = {alias}.example_id)"


def has_example_env(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether ``schema``'s ``examples`` table has the ``env`` column (files written before it lack it)."""
    found = conn.execute(f"SELECT 1 FROM pragma_table_info('examples', '{schema}') WHERE name = 'env'").fetchone()
    return found is not None


def ensure_example_env(conn: sqlite3.Connection) -> None:
    """Add ``examples.env`` to a file written before it existed (its examples keep ``NULL``: one env)."""
    if not has_example_env(conn):
        conn.execute("ALTER TABLE examples ADD COLUMN env TEXT")
    # partial: empty in a run of one env, so "does this run name envs?" is one lookup
    conn.execute("CREATE INDEX IF NOT EXISTS examples_by_env ON examples (env) WHERE env IS NOT NULL")


def defer_rollout_indexes(conn: sqlite3.Connection) -> bool:
    """Drop the indexes of ``rollouts`` before a bulk copy into it (the caller checked it is empty).

    Returns whether they were dropped: a file whose ids are unique by column constraint
    (written before ``rollouts_by_id``) keeps them. :func:`ensure_rollout_indexes` puts them back.
    """
    if _unique_by_constraint(conn):
        return False
    for name in _ROLLOUT_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    return True


def ensure_rollout_indexes(conn: sqlite3.Connection) -> None:
    """Build whichever rollout indexes are missing (all of them after :func:`defer_rollout_indexes`)."""
    constrained = _unique_by_constraint(conn)
    for name, statement in _ROLLOUT_INDEXES.items():
        if not (name == "rollouts_by_id" and constrained):
            conn.execute(statement)


def has_trace_ids(conn: sqlite3.Connection, schema: str = "main") -> bool:
    """Whether the file's ``rollouts`` table has the ``trace_id`` column (files before it do not)."""
    found = conn.execute(f"SELECT 1 FROM pragma_table_info('rollouts', '{schema}') WHERE name = 'trace_id'")
    return found.fetchone() is not None


def _unique_by_constraint(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM pragma_index_list('rollouts') WHERE origin = 'u'").fetchone() is not None


def check_readable(conn: sqlite3.Connection, path: Path) -> int:
    """The version of ``path``'s layout, which this benchmax must be able to read."""
    found = version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaError(
            f"{path} was written by a newer benchmax (store layout {found}, this one reads up to "
            f"{SCHEMA_VERSION}); upgrade benchmax to read it"
        )
    return found


def _has(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row is not None
