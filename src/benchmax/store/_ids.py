"""Short example ids: the shortest prefix that names one example of a run, as git names commits.

Example ids are usually 64-hex digests of the example's content. Printed whole
they wrap over several lines of every table a person reads, and nobody reads
past the first few characters anyway. A short id is the id's shortest prefix
(never under :data:`MIN_SHORT_ID` characters) that no other example id of the
run shares, so it still finds the example in the inspector's search, an export
or ``grep``. A mixture's ids (``math/<digest>``) keep their env and cut the
digest after it the same way (``math/179dd2e8``). Ids a person chose
(``gsm8k-0012``) are shown whole: only ids that end in a digest are cut. Links,
exports and the API keep the full id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

MIN_SHORT_ID = 8
"""The shortest prefix shown, whatever the run's size (git's default is 7)."""

_DIGEST_MIN_CHARS = 16
_HEX = frozenset("0123456789abcdefABCDEF")

_NEIGHBOURS = (
    "SELECT MAX(example_id) FROM {table} WHERE example_id < ?",
    "SELECT MIN(example_id) FROM {table} WHERE example_id > ?",
)
_TABLES = ("examples", "groups")
"""Where a run's example ids are kept, each with an index on ``example_id``: an id a
resumed run has only in ``groups`` (or only in ``examples``) still counts."""


def is_digest(example_id: str) -> bool:
    """Whether an id looks machine-made (long and hex), so that a prefix of it names it."""
    return len(example_id) >= _DIGEST_MIN_CHARS and _HEX.issuperset(example_id)


def short_ids(connections: Sequence[sqlite3.Connection], example_ids: Iterable[str]) -> dict[str, str]:
    """``{full id: short id}``, each prefix unique among the example ids of every run given.

    Several runs are given when one table shows ids from all of them (``diff``):
    a prefix that is unique in one run may name two examples in the other. Each
    id costs two indexed lookups per run and table, so this stays cheap on a
    million-example run.
    """
    result: dict[str, str] = {}
    for example_id in example_ids:
        if example_id in result:
            continue
        start = _digest_start(example_id)
        if start is None:
            result[example_id] = example_id
            continue
        shared = 0
        for connection in connections:
            for neighbour in _neighbours(connection, example_id):
                shared = max(shared, _common_prefix(example_id, neighbour))
        result[example_id] = example_id[: start + max(MIN_SHORT_ID, shared - start + 1)]
    return result


def _digest_start(example_id: str) -> int | None:
    """Where the digest of an id starts: 0 for a bare digest, after ``ENV/`` for a mixture's id."""
    if is_digest(example_id):
        return 0
    env, slash, tail = example_id.rpartition("/")
    return len(env) + 1 if slash and env and is_digest(tail) else None


def _neighbours(connection: sqlite3.Connection, example_id: str) -> list[str]:
    """The ids just before and after ``example_id`` in sort order: the only ones that can share its longest prefix."""
    found: list[str] = []
    for table in _TABLES:
        for query in _NEIGHBOURS:
            try:
                row = connection.execute(query.format(table=table), (example_id,)).fetchone()
            except sqlite3.OperationalError:  # a store written before the table existed
                break
            if row and row[0] is not None:
                found.append(row[0])
    return found


def _common_prefix(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count
