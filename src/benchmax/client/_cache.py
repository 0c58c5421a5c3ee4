"""The response cache: model replies on disk, keyed by the whole request, so a re-run costs no calls.

One SQLite file (``responses.sqlite``) in the cache directory, in WAL mode, so
several processes (two evals, Ray actors on one machine) read and write it at
once; each write is its own short transaction. Not on a network file system:
SQLite's locking is not safe there.

The key is the SHA-256 of canonical JSON (sorted keys, no spaces, integral
floats written as integers) of everything that decides the reply: the request
body as sent (model name, messages, tools, tool_choice, every sampling field,
seed and ``extra_body`` fields included) and :data:`CACHE_FORMAT`. The base URL
is not part of it: the model name is the endpoint's identity as the user means
it, so replicas, a restarted server on another port, or another host serving
the same name share entries. A request that samples (temperature absent or
above 0) without a seed names no single reply: by default the key also holds
the rollout it serves (``unseeded="per-rollout"``: a re-run replays each
rollout's own draw, and siblings stay different); ``unseeded="skip"`` never
caches those.

Only complete replies are written (a finish reason of ``stop``, ``length``,
``tool_calls`` or ``function_call``): an error, a malformed or cut-off body
never reaches here (the client raises or retries), and a reply without a usable
finish reason is not kept. Past ``max_bytes`` of stored replies the least
recently used are evicted. A cache that fails (disk full, a broken file) never
fails a rollout: the request goes to the model, and the failure is logged once.

Not pickle: values are compressed JSON, so a cache directory someone else
could write to can at worst feed wrong replies, never run code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import math
import sqlite3
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from benchmax.client._numbers import logprob, token_count, token_ids
from benchmax.client._types import ChatResult
from benchmax.envs import Usage
from benchmax.errors import BenchmaxError

logger = logging.getLogger("benchmax.client")

CACHE_FORMAT = 1
"""Part of every key: bump it when what is keyed or stored changes, and old entries stop matching."""

DEFAULT_MAX_BYTES = 2 << 30
"""Stored replies kept before the least recently used are evicted (``--cache-max-mb``)."""

CACHE_FILE = "responses.sqlite"
UNSEEDED = ("per-rollout", "skip")
Unseeded = Literal["per-rollout", "skip"]
COMPLETE_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "function_call"})
"""Replies the cache keeps: the server said how the turn ended, and it ended."""

_LAYOUT = 1
_TOUCH_SECONDS = 60.0
"""A hit refreshes its entry's last use at most this often (a write per hit would serialise readers)."""
_EVICT_TO = 0.9
"""Eviction frees down to this share of ``max_bytes``, so it runs once per many writes, not on each."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS info (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    value BLOB NOT NULL,
    size INTEGER NOT NULL,
    stored_at REAL NOT NULL,
    used_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS responses_by_use ON responses (used_at);
"""


class CacheError(BenchmaxError):
    """The cache directory cannot be used (not writable, not a cache, a newer layout)."""


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Where replies are cached and how: ``judge`` also caches judge calls (``benchmax.rewards.Judge``)."""

    directory: Path
    max_bytes: int = DEFAULT_MAX_BYTES
    judge: bool = True
    unseeded: Unseeded = "per-rollout"

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory))
        if self.max_bytes < 1:
            raise ValueError(f"the cache's max_bytes must be >= 1, got {self.max_bytes}")
        if self.unseeded not in UNSEEDED:
            raise ValueError(f"unseeded must be one of {', '.join(UNSEEDED)}, got {self.unseeded!r}")

    def to_meta(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "max_bytes": self.max_bytes,
            "judge": self.judge,
            "unseeded": self.unseeded,
        }

    @classmethod
    def from_meta(cls, data: Mapping[str, Any] | None) -> CacheSettings | None:
        if not data:
            return None
        return cls(Path(data["directory"]), int(data["max_bytes"]), bool(data["judge"]), data["unseeded"])


class UncacheableRequest(ValueError):
    """A request body that has no canonical JSON form (NaN, a non-string key, an unknown type)."""


def samples(body: Mapping[str, Any]) -> bool:
    """Whether the request draws a random reply: it samples (temperature absent: the server's
    default, or above 0) and names no seed."""
    if body.get("seed") is not None:
        return False
    temperature = body.get("temperature")
    return temperature is None or not isinstance(temperature, int | float) or temperature > 0


def request_key(body: Mapping[str, Any], *, draw: str | None = None) -> str:
    """The cache key of a request: stable across processes, machines and Python versions."""
    material = {"format": CACHE_FORMAT, "request": _canonical(body), "draw": draw}
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any, depth: int = 0) -> Any:
    if depth > 100:
        raise UncacheableRequest("nested more than 100 levels")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UncacheableRequest(f"{value!r} has no JSON form")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise UncacheableRequest(f"a key {key!r} that is not a string")
            result[key] = _canonical(item, depth + 1)
        return result
    if isinstance(value, list | tuple):
        return [_canonical(item, depth + 1) for item in value]
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays, as the client sends them
    if callable(tolist):
        return _canonical(tolist(), depth + 1)
    raise UncacheableRequest(f"a {type(value).__name__} value has no canonical JSON form")


def encode(result: ChatResult) -> bytes:
    """A reply as the cache stores it (compressed JSON of every field the client parsed)."""
    usage = result.usage
    data = {
        "message": result.message,
        "finish_reason": result.finish_reason,
        "usage": [usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens],
        "prompt_token_ids": result.prompt_token_ids,
        "completion_token_ids": result.completion_token_ids,
        "completion_logprobs": result.completion_logprobs,
        "response_model": result.response_model,
    }
    return zlib.compress(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY), 6)


def decode(value: bytes) -> ChatResult:
    data = orjson.loads(zlib.decompress(value))
    message = data["message"]
    if not isinstance(message, dict):
        raise ValueError("the stored message is not an object")
    # the checks a reply passes (an entry kept before them must not bring back a number the store cannot keep)
    prompt, completion, cached = (token_count(number, "usage") for number in data["usage"])

    def ints(name: str) -> tuple[int, ...] | None:
        items = data.get(name)
        if not isinstance(items, list):
            return None
        found = token_ids(items, name)
        if found is None:
            raise ValueError(f"the stored {name} are not integers")
        return found

    logprobs = data.get("completion_logprobs")
    model = data.get("response_model")  # absent in entries kept before replies carried it
    return ChatResult(
        message=message,
        finish_reason=data["finish_reason"] if isinstance(data.get("finish_reason"), str) else None,
        usage=Usage(prompt, completion, cached),
        prompt_token_ids=ints("prompt_token_ids"),
        completion_token_ids=ints("completion_token_ids"),
        completion_logprobs=tuple(logprob(float(item), "completion_logprobs") for item in logprobs)
        if isinstance(logprobs, list)
        else None,
        response_model=model[:200] if isinstance(model, str) else None,
    )


def cacheable(result: ChatResult) -> bool:
    return result.finish_reason in COMPLETE_FINISH_REASONS


class ResponseCache:
    """The cache file of one directory, used from async code: every SQLite call runs on one
    thread of its own (its connection lives there), so the event loop never waits on the disk."""

    def __init__(self, settings: CacheSettings) -> None:
        self.settings = settings
        self.path = settings.directory / CACHE_FILE
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="benchmax-cache")
        self._conn: sqlite3.Connection | None = None
        self._failed = False
        self._closed = False
        self.errors = 0
        """Reads or writes that failed (each went to the model instead)."""

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def open(self) -> None:
        """Open (or create) the file now, so a directory that cannot hold a cache fails before a run starts."""
        self._thread.submit(self._open).result()

    async def get(self, key: str) -> ChatResult | None:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._get, key)

    async def put(self, key: str, result: ChatResult, *, model: str) -> bool:
        """Keep a complete reply; ``False`` when it was not written (incomplete, there already, or a failure)."""
        if not cacheable(result):
            return False
        value = encode(result)
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._put, key, model, value)

    def entries(self) -> tuple[int, int]:
        """Replies stored and their bytes (for reports and tests)."""
        return self._thread.submit(self._entries).result()

    def close(self) -> None:
        """Close the file (a closed cache is not used again)."""
        if self._closed:
            return
        self._closed = True
        self._thread.submit(self._close).result()
        self._thread.shutdown(wait=True)

    # -- on the cache's thread --------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._open()
        assert self._conn is not None
        return self._conn

    def _open(self) -> None:
        if self._conn is not None:
            return
        try:
            self.settings.directory.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot use {self.settings.directory} as a response cache: {exc}") from None
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            if not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # set before the first table: evictions shrink the file
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT OR IGNORE INTO info (name, value) VALUES ('layout', ?)", (str(_LAYOUT),))
                conn.execute("INSERT OR IGNORE INTO info (name, value) VALUES ('bytes', '0')")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            layout = int(conn.execute("SELECT value FROM info WHERE name = 'layout'").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise CacheError(
                f"{self.path} is not a benchmax response cache ({exc}); delete it or give another --cache directory"
            ) from None
        if layout != _LAYOUT:
            conn.close()
            raise CacheError(
                f"{self.path} was written by another benchmax (cache layout {layout}, this one uses {_LAYOUT}); "
                "give another --cache directory"
            )
        self._conn = conn

    def _get(self, key: str) -> ChatResult | None:
        if self._failed:
            return None
        try:
            conn = self._connection()
            row = conn.execute("SELECT value, used_at, size FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            try:
                result = decode(row[0])
            except (ValueError, KeyError, TypeError, zlib.error, orjson.JSONDecodeError) as exc:
                # A damaged entry is a miss, never a reply: drop it so the model's fresh reply takes its place.
                self._failure("read", exc)
                self._drop(conn, key, int(row[2]))
                return None
            now = time.time()
            if row[1] < now - _TOUCH_SECONDS:
                conn.execute("UPDATE responses SET used_at = ? WHERE key = ?", (now, key))
            return result
        except (sqlite3.Error, CacheError) as exc:
            self._failure("read", exc)
            return None

    def _drop(self, conn: sqlite3.Connection, key: str, size: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("DELETE FROM responses WHERE key = ?", (key,)).rowcount:
                conn.execute("UPDATE info SET value = MAX(CAST(value AS INTEGER) - ?, 0) WHERE name = 'bytes'", (size,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _put(self, key: str, model: str, value: bytes) -> bool:
        if self._failed:
            return False
        size = len(value) + len(key) + len(model)
        now = time.time()
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                inserted = conn.execute(
                    "INSERT INTO responses (key, model, value, size, stored_at, used_at) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING",
                    (key, model, value, size, now, now),
                ).rowcount
                if inserted:
                    conn.execute("UPDATE info SET value = CAST(value AS INTEGER) + ? WHERE name = 'bytes'", (size,))
                    total = conn.execute("SELECT value FROM info WHERE name = 'bytes'").fetchone()[0]
                    evicted = self._evict(conn, int(total)) if int(total) > self.settings.max_bytes else 0
                else:
                    evicted = 0
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if evicted:
                conn.execute("PRAGMA incremental_vacuum")
            return bool(inserted)
        except (sqlite3.Error, CacheError) as exc:
            self._failure("write", exc)
            return False

    def _evict(self, conn: sqlite3.Connection, total: int) -> int:
        """Remove the least recently used replies until the total is back under the bound."""
        target = int(self.settings.max_bytes * _EVICT_TO)
        evicted = 0
        while total > target:
            rows = conn.execute("SELECT key, size FROM responses ORDER BY used_at LIMIT 256").fetchall()
            if not rows:
                break
            chosen = []
            for key, size in rows:
                chosen.append((key,))
                total -= size
                if total <= target:
                    break
            conn.executemany("DELETE FROM responses WHERE key = ?", chosen)
            evicted += len(chosen)
        conn.execute("UPDATE info SET value = ? WHERE name = 'bytes'", (str(max(total, 0)),))
        return evicted

    def _entries(self) -> tuple[int, int]:
        conn = self._connection()
        count, size = conn.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM responses").fetchone()
        return int(count), int(size)

    def _failure(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            self._failed = True  # a broken file: stop using it for this run
        if self.errors == 1:
            logger.warning(
                "the response cache %s failed to %s (%s: %s); those requests go to the model",
                self.path,
                what,
                type(exc).__name__,
                exc,
            )

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
