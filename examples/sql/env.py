"""Question answering over a SQLite database: a fresh copy per rollout, read-only tools.

``rollout_context`` seeds a new database file in a temp dir from ``shop.sql``
(schema and data) for every rollout, then opens it read-only three ways over:
the ``mode=ro`` URI, ``PRAGMA query_only``, and an authorizer that allows only
reading (no writes, ``ATTACH``, ``VACUUM INTO``, settings or extensions). Every
statement runs off the event loop under a wall-clock deadline (a progress
handler interrupts it) and returns at most ``max_rows`` rows.

The model explores with ``list_tables``, ``describe`` and ``query`` and answers
with one SQL query in a ```` ```sql ```` block. ``correct`` is 1.0 when that
query's result equals the gold query's: as a multiset of rows, or as a list
when the gold query has an ``ORDER BY`` (column names do not matter; floats are
compared to 6 decimals).
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetError,
    DatasetSplit,
    Example,
    JsonlDataset,
    Tool,
    ToolError,
)
from benchmax.rewards import extract_code_block, extract_completion_text

logger = logging.getLogger(__name__)

_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# Introspection pragmas whose argument is a name: none of them can change a setting.
_READ_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"})
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
_MAX_CELL_CHARS = 200
_TABLES = "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "list_tables",
            "description": "List the tables of the database.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "describe",
            "description": "Show a table's columns (name, type, primary key), its CREATE statement and row count.",
            "parameters": {
                "type": "object",
                "properties": {"table": {"type": "string"}},
                "required": ["table"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "query",
            "description": "Run one read-only SQL statement (SQLite dialect); returns columns and rows.",
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string"}},
                "required": ["sql"],
                "additionalProperties": False,
            },
        },
    },
]


def _authorize(action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: str | None) -> int:
    """SQLite's authorizer: reading is allowed, anything else is refused at prepare time."""
    if action in _READ_ACTIONS or (action == sqlite3.SQLITE_PRAGMA and arg1 in _READ_PRAGMAS):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


class _ReadOnlyDatabase:
    """One rollout's database: a read-only connection, one statement at a time."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False)
        self.connection.execute("PRAGMA query_only = ON")
        self.connection.set_authorizer(_authorize)
        self.lock = asyncio.Lock()

    def run(self, sql: str, max_rows: int, parameters: tuple[Any, ...] = ()) -> QueryResult:
        deadline = time.monotonic() + self.timeout
        self.connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            cursor = self.connection.execute(sql, parameters)
            rows = cursor.fetchmany(max_rows + 1)
            columns = [column[0] for column in cursor.description or ()]
            cursor.close()
        except sqlite3.Error as exc:
            if str(exc) == "interrupted":
                raise ToolError(f"the query ran past the {self.timeout:g} s time limit and was stopped") from None
            if "not authorized" in str(exc) or "authorization denied" in str(exc):
                raise ToolError(f"the database is read-only: only SELECT queries are allowed ({exc})") from None
            raise ToolError(f"SQL error: {exc}") from None
        finally:
            self.connection.set_progress_handler(None, 0)
        return QueryResult(columns, rows[:max_rows], len(rows) > max_rows)

    async def arun(self, sql: str, max_rows: int, parameters: tuple[Any, ...] = ()) -> QueryResult:
        async with self.lock:
            return await asyncio.to_thread(self.run, sql, max_rows, parameters)

    async def tables(self) -> list[str]:
        result = await self.arun(_TABLES, 1000)
        return [name for (name,) in result.rows]

    def close(self) -> None:
        self.connection.close()


def _seed(path: Path, script: str) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.executescript(script)
    finally:
        connection.close()


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > _MAX_CELL_CHARS:
        return value[:_MAX_CELL_CHARS] + "…"
    return value


def _normalised(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows]


def results_match(got: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], *, ordered: bool) -> bool:
    """Row-for-row equality when ``ordered``, else equality as multisets of rows."""
    got, gold = _normalised(got), _normalised(gold)
    return got == gold if ordered else Counter(got) == Counter(gold)


def row_to_example(row: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(row.get("gold_sql"), str) or not row["gold_sql"].strip():
        raise DatasetError("'gold_sql' must be a non-empty SQL string")
    return row


class SqlEnv(BaseEnv):
    """``schema`` (a ``.sql`` file of CREATE and INSERT statements) seeds each rollout's database."""

    max_turns = 10
    max_tool_calls = 16

    def __init__(
        self,
        *,
        schema: str | Path | None = None,
        max_rows: int = 50,
        query_timeout: float = 2.0,
        max_answer_rows: int = 10_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.schema = Path(schema or Path(__file__).with_name("shop.sql")).resolve()
        if not self.schema.is_file():
            raise ValueError(f"schema file {self.schema} does not exist")
        self.max_rows = max_rows
        self.query_timeout = query_timeout
        self.max_answer_rows = max_answer_rows
        self._script = self.schema.read_text(encoding="utf-8")
        self._databases: dict[str, _ReadOnlyDatabase] = {}

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=row_to_example, max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        root = Path(tempfile.mkdtemp(prefix="benchmax-sql-"))
        database: _ReadOnlyDatabase | None = None
        try:
            path = root / "shop.sqlite"
            await asyncio.to_thread(_seed, path, self._script)
            database = _ReadOnlyDatabase(path, self.query_timeout)
            self._databases[rollout_id] = database
            logger.info("database for %s at %s", rollout_id, path)
            yield
        finally:
            self._databases.pop(rollout_id, None)
            if database is not None:
                database.close()
            # Synchronous on purpose: it must finish even while the task is being cancelled.
            shutil.rmtree(root, ignore_errors=True)

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        database = self._databases[rollout_id]
        if tool_name == "list_tables":
            return await database.tables()
        if tool_name == "describe":
            return await self._describe(database, tool_args["table"])
        if tool_name == "query":
            result = await database.arun(tool_args["sql"], self.max_rows)
            shown: dict[str, Any] = {
                "columns": result.columns,
                "rows": [[_cell(value) for value in row] for row in result.rows],
            }
            if result.truncated:
                shown["note"] = f"only the first {self.max_rows} rows are shown"
            return shown
        raise ToolError(f"unknown tool {tool_name!r}")

    async def _describe(self, database: _ReadOnlyDatabase, table: str) -> dict[str, Any]:
        found = await database.arun(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE", 1, (table,)
        )
        if not found.rows:
            tables = await database.tables()
            raise ToolError(f"no table named {table!r}; tables: {', '.join(tables)}")
        name, create = found.rows[0]
        identifier = '"' + name.replace('"', '""') + '"'
        # PRAGMA takes no bound parameters; the name comes from sqlite_schema and is quoted.
        columns = await database.arun(f"PRAGMA table_info({identifier})", 1000)
        count = await database.arun(f"SELECT COUNT(*) FROM {identifier}", 1)
        return {
            "table": name,
            "columns": [
                {"name": column, "type": kind, "primary_key": bool(pk)}
                for _, column, kind, _, _, pk in columns.rows
            ],
            "rows": count.rows[0][0],
            "create": create,
        }

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_code_block(extract_completion_text(rollout.messages), "sql")
        if not answer or not answer.strip():
            return {"correct": 0.0}
        database = self._databases[rollout.rollout_id]
        gold_sql = rollout.example_args["gold_sql"]
        gold = await database.arun(gold_sql, self.max_answer_rows)
        try:
            got = await database.arun(answer, self.max_answer_rows)
        except ToolError as exc:
            logger.info("the answer query failed: %s", exc)
            return {"correct": 0.0}
        ordered = bool(_ORDER_BY.search(gold_sql))
        return {"correct": float(not got.truncated and results_match(got.rows, gold.rows, ordered=ordered))}
