"""Reading a run back: typed records for notebooks, trainers, exports and the inspector."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import Example, LogEntry
from benchmax.store import schema
from benchmax.store.stats import RunStats, compute_stats


@dataclass(frozen=True, slots=True)
class RolloutRecord:
    """One stored rollout.

    ``rewards`` are the values after the batch zero-fill; ``raw_rewards`` are what
    the env emitted; ``filled`` names the components that were filled with 0.0.
    ``reward`` is the sum of ``rewards`` (``None`` for an unscored rollout whose
    batch emitted no component at all).
    """

    rollout_id: str
    group_id: str
    example_id: str
    sample_index: int
    step: int | None
    batch: int
    split: str
    termination_reason: str
    error: str | None
    rewards: dict[str, float]
    raw_rewards: dict[str, float]
    filled: frozenset[str]
    reward: float | None
    prompt_tokens: int
    completion_tokens: int
    num_turns: int
    num_tool_calls: int
    started_at: float
    ended_at: float
    seconds: float
    final_text: str
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    sampling: dict[str, Any] | None

    @property
    def scored(self) -> bool:
        return bool(self.raw_rewards)

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        data["filled"] = sorted(self.filled)
        return data


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    example_id: str
    example_idx: int
    batch: int
    step: int | None
    size: int
    started_at: float | None
    ended_at: float | None


_ROLLOUT_COLUMNS = (
    "rollout_id, group_id, example_id, sample_index, step, batch, split, termination_reason, "
    "error, reward, prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, "
    "ended_at, seconds, final_text, messages, turns, sampling"
)


class Run:
    """A run directory opened read-only (safe while a writer is still adding to it)."""

    def __init__(self, path: str | Path) -> None:
        db = schema.locate(path)
        self.path = db.parent
        self._conn = schema.connect(db, readonly=True)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def sql(self, query: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query (the connection cannot write)."""
        return self._conn.execute(query, params).fetchall()

    @property
    def meta(self) -> dict[str, Any]:
        rows = self._conn.execute("SELECT key, value FROM meta WHERE key != 'schema_version'")
        return {key: orjson.loads(value) for key, value in rows}

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]

    def examples(self) -> list[Example]:
        rows = self._conn.execute("SELECT example_id, payload FROM examples ORDER BY idx")
        return [Example(example_id, orjson.loads(payload)) for example_id, payload in rows]

    def groups(self) -> list[GroupRecord]:
        rows = self._conn.execute(
            "SELECT group_id, example_id, example_idx, batch, step, size, started_at, ended_at "
            "FROM groups ORDER BY example_idx, step"
        )
        return [GroupRecord(*row) for row in rows]

    def rollouts(
        self, *, group_id: str | None = None, example_id: str | None = None
    ) -> Iterator[RolloutRecord]:
        """Rollouts in the order they were stored, optionally of one group or example."""
        where, params = _where(group_id=group_id, example_id=example_id)
        cursor = self._conn.execute(
            f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts {where} ORDER BY seq", params
        )
        while rows := cursor.fetchmany(256):
            rewards = self._rewards([row[0] for row in rows])
            for row in rows:
                yield _record(row, rewards.get(row[0], {}))

    def rollout(self, rollout_id: str) -> RolloutRecord:
        row = self._conn.execute(
            f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id = ?", (rollout_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no rollout {rollout_id!r} in {self.path}")
        return _record(row, self._rewards([rollout_id]).get(rollout_id, {}))

    def logs(self, *, rollout_id: str | None = None, group_id: str | None = None) -> list[LogEntry]:
        if rollout_id is not None:
            where, params = "WHERE rollout_id = ?", (rollout_id,)
        elif group_id is not None:
            where, params = "WHERE group_id = ? AND rollout_id IS NULL", (group_id,)
        else:
            where, params = "", ()
        rows = self._conn.execute(
            "SELECT time, level, logger, message, file, line, turn, phase, traceback "
            f"FROM logs {where} ORDER BY id",
            params,
        )
        return [LogEntry(*row) for row in rows]

    def steps(self) -> list[tuple[int, float, dict[str, Any]]]:
        """A training run's ``(step, time, metrics)`` in step order; ``[]`` for other runs."""
        try:
            rows = self._conn.execute("SELECT step, time, metrics FROM steps ORDER BY step").fetchall()
        except sqlite3.OperationalError:  # a store written before the table existed
            return []
        return [(step, at, orjson.loads(metrics)) for step, at, metrics in rows]

    def stats(self, *, pass_threshold: float | None = None) -> RunStats:
        threshold = pass_threshold if pass_threshold is not None else self.meta.get("pass_threshold", 1.0)
        return compute_stats(self._conn, pass_threshold=threshold, meta=self.meta)

    def _rewards(self, rollout_ids: list[str]) -> dict[str, dict[str, tuple[float, bool]]]:
        result: dict[str, dict[str, tuple[float, bool]]] = {}
        marks = ",".join("?" * len(rollout_ids))
        rows = self._conn.execute(
            f"SELECT rollout_id, component, value, filled FROM rewards WHERE rollout_id IN ({marks})",
            rollout_ids,
        )
        for rollout_id, component, value, filled in rows:
            result.setdefault(rollout_id, {})[component] = (value, bool(filled))
        return result


def open_run(path: str | Path) -> Run:
    """Open a run directory (or its ``run.sqlite``) for reading."""
    return Run(path)


def _where(**filters: Any) -> tuple[str, tuple[Any, ...]]:
    clauses = [f"{name} = ?" for name, value in filters.items() if value is not None]
    params = tuple(value for value in filters.values() if value is not None)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _record(row: sqlite3.Row | tuple[Any, ...], rewards: dict[str, tuple[float, bool]]) -> RolloutRecord:
    (
        rollout_id,
        group_id,
        example_id,
        sample_index,
        step,
        batch,
        split,
        reason,
        error,
        reward,
        prompt_tokens,
        completion_tokens,
        num_turns,
        num_tool_calls,
        started_at,
        ended_at,
        seconds,
        final_text,
        messages,
        turns,
        sampling,
    ) = row
    return RolloutRecord(
        rollout_id=rollout_id,
        group_id=group_id,
        example_id=example_id,
        sample_index=sample_index,
        step=step,
        batch=batch,
        split=split,
        termination_reason=reason,
        error=error,
        rewards={name: value for name, (value, _) in rewards.items()},
        raw_rewards={name: value for name, (value, filled) in rewards.items() if not filled},
        filled=frozenset(name for name, (_, filled) in rewards.items() if filled),
        reward=reward,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        num_turns=num_turns,
        num_tool_calls=num_tool_calls,
        started_at=started_at,
        ended_at=ended_at,
        seconds=seconds,
        final_text=final_text,
        messages=orjson.loads(messages),
        turns=orjson.loads(turns),
        sampling=orjson.loads(sampling) if sampling else None,
    )
