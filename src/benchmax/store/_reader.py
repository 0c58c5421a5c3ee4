"""Reading a run back: typed records for notebooks, trainers, exports and rescoring."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import Example, LogEntry, TurnRecord
from benchmax.store import _codec, _compat, _run_stats, _schema
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._excerpt import prompt_excerpts
from benchmax.store._ids import short_ids
from benchmax.store._meta import RunMeta, labelled
from benchmax.store._suite import EnvFigures, env_figures


@dataclass(frozen=True, slots=True)
class RolloutRecord:
    """One stored rollout.

    ``rewards`` are the values after the batch zero-fill; ``raw_rewards`` are what
    the env emitted; ``filled`` names the components that were filled with 0.0.
    ``reward`` is the sum of ``rewards`` (``None`` for an unscored rollout whose
    batch emitted no component at all). ``scored`` is the ``scored`` column: the
    writer applied :func:`benchmax.envs.is_scored` to the outcome, scoring
    failures included, which the reason and rewards alone cannot tell.
    ``turns`` are the :class:`~benchmax.envs.TurnRecord` the engine wrote, read back
    (:func:`decode_turns`); :meth:`to_dict` gives them in their stored JSON form.
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
    turns: tuple[TurnRecord, ...]
    sampling: dict[str, Any] | None
    scored: bool
    trace_id: str | None = None
    """The rollout's OpenTelemetry trace id when it was traced (``--otel-endpoint``; docs/telemetry.md)."""
    env: str | None = None
    """The env of the rollout's example: its name in a mixture, the run's env (its metadata's
    :attr:`~benchmax.store.RunMeta.env_label`) in a run of one env."""

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        data["filled"] = sorted(self.filled)
        data["turns"] = orjson.loads(_codec.dumps(self.turns))
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
    env: str | None = None
    """The env of the group's example (as :attr:`RolloutRecord.env`)."""


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A stored group read whole, as rescoring reads it: its record, its example as stored (``env``
    named in a mixture; ``None`` when the run did not store the example) and its rollouts in sample
    order, with their ``seq`` (what a :class:`~benchmax.store.RolloutScore` is keyed by) alongside."""

    group: GroupRecord
    example: Example | None
    rollouts: tuple[RolloutRecord, ...]
    seqs: tuple[int, ...]


ROLLOUT_NAMES = (
    "seq", "rollout_id", "group_id", "example_id", "sample_index", "step", "batch", "split", "termination_reason",
    "error", "reward", "prompt_tokens", "completion_tokens", "num_turns", "num_tool_calls", "started_at",
    "ended_at", "seconds", "final_text", "messages", "turns", "sampling", "scored", "trace_id", "env",
)  # fmt: skip
"""The columns of a whole stored rollout, in ``ROLLOUT_COLUMNS`` order: the one read of a rollout
that the typed records and the inspector's pages both take."""
_TRANSCRIPT_NAMES = ("messages", "turns", "sampling")
ROLLOUT_COLUMNS = ", ".join(
    f"t.{name}" if name in _TRANSCRIPT_NAMES else _schema.example_env("r") if name == "env" else f"r.{name}"
    for name in ROLLOUT_NAMES
)
ROLLOUT_SOURCE = "rollouts AS r JOIN transcripts AS t ON t.seq = r.seq"
"""What ``ROLLOUT_COLUMNS`` select from: the env is ``NULL`` in a run of one env (see :attr:`Run.env_label`)."""
_GROUP_COLUMNS = (
    "g.group_id, g.example_id, g.example_idx, g.batch, g.step, g.size, g.started_at, g.ended_at, "
    + _schema.example_env("g")
)
_BARE_COLUMNS = ", ".join(
    f"t.{name}" if name in _TRANSCRIPT_NAMES else "NULL" if name == "env" else f"r.{name}" for name in ROLLOUT_NAMES
)
"""``ROLLOUT_COLUMNS`` with ``NULL`` for the env, without the lookup of each rollout's example: for a
reader that looks up the examples of a chunk of rows once (an export)."""
_CHUNK = 512


class Run:
    """A run directory opened read-only (safe while a writer is still adding to it).

    ``sql()`` runs read-only SQL over the store's tables (layout in
    ``benchmax.store._schema``); transcripts are compressed, ``bmx_json(column)``
    reads them: ``SELECT bmx_json(messages) FROM transcripts``.
    """

    def __init__(self, path: str | Path) -> None:
        db = _schema.locate(path)
        self.path = db.parent
        self._conn, self.layout = _compat.connect_reader(db)
        self.env_label = self.run_meta.env_label
        """The env a rollout of no named env belongs to: the run's own (a run of one env)."""

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _db(self) -> sqlite3.Connection:
        return self._conn

    def sql(self, query: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query (the connection cannot write)."""
        return self._conn.execute(query, params).fetchall()

    @property
    def meta(self) -> dict[str, Any]:
        """The meta table as a plain dict, as stored (public, for users' code)."""
        rows = self._conn.execute("SELECT key, value FROM meta WHERE key != 'schema_version'").fetchall()
        return {key: orjson.loads(value) for key, value in rows}

    @property
    def run_meta(self) -> RunMeta:
        """The run's metadata as its typed record (what every reader inside benchmax uses)."""
        return RunMeta.from_json(self.meta)

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]

    def examples(self) -> list[Example]:
        return list(self.iter_examples())

    def iter_examples(self) -> Iterator[Example]:
        """The stored examples in dataset order, streamed, each with its env in a mixture (``None`` in a
        run of one env): the ``examples.env`` column, never a reading of the example's id."""
        cursor = self._conn.execute("SELECT example_id, payload, env FROM examples ORDER BY idx")
        while rows := cursor.fetchmany(_CHUNK):
            for example_id, payload, env in rows:
                yield Example(example_id, orjson.loads(payload), env)

    def prompts(self, example_ids: Sequence[str]) -> dict[str, str]:
        """``{example_id: prompt excerpt}``: how a list of examples shows each (one bounded line)."""
        return prompt_excerpts(self._conn, example_ids)

    def groups(self) -> list[GroupRecord]:
        return list(self.iter_groups())

    def iter_groups(self) -> Iterator[GroupRecord]:
        cursor = self._conn.execute(f"SELECT {_GROUP_COLUMNS} FROM groups AS g ORDER BY g.example_idx, g.step")
        while rows := cursor.fetchmany(_CHUNK):
            yield from (self._group(row) for row in rows)

    def _group(self, row: Sequence[Any]) -> GroupRecord:
        return GroupRecord(*row[:-1], env=labelled(row[-1], self.env_label))

    def group_ranges(self, groups: int) -> list[tuple[int, int]]:
        """The run's groups as ``(first_seq, last_seq)`` ranges of about ``groups`` groups each, in
        the order they were stored: the chunks :meth:`stored_groups` reads."""
        rows = self._conn.execute("SELECT first_seq, last_seq FROM groups ORDER BY first_seq").fetchall()
        return [(part[0][0], part[-1][1]) for part in chunks(rows, groups)]

    def stored_groups(self, first: int, last: int) -> list[StoredGroup]:
        """The groups whose rollouts begin in ``[first, last]`` (a range of :meth:`group_ranges`), whole."""
        groups = self._conn.execute(
            f"SELECT {_GROUP_COLUMNS}, g.first_seq, g.last_seq FROM groups AS g"
            " WHERE g.first_seq BETWEEN ? AND ? ORDER BY g.first_seq",
            (first, last),
        ).fetchall()
        rows = [row for part in self.rollout_rows_between(first, last) for row in part]
        rewards = self.rewards_of([row[0] for row in rows])
        records = {row[0]: (row[4], _record(row, rewards.get(row[0], {}), self.env_label)) for row in rows}
        examples = self._examples_by_id({row[1] for row in groups})
        found = []
        for row in groups:
            low, high = row[-2], row[-1]
            members = sorted(
                ((records[seq][0], seq, records[seq][1]) for seq in range(low, high + 1) if seq in records),
                key=lambda member: member[0],
            )
            found.append(
                StoredGroup(
                    group=self._group(row[:-2]),
                    example=examples.get(row[1]),
                    rollouts=tuple(record for _, _, record in members),
                    seqs=tuple(seq for _, seq, _ in members),
                )
            )
        return found

    def _examples_by_id(self, wanted: set[str]) -> dict[str, Example]:
        found: dict[str, Example] = {}
        for part in chunks(sorted(wanted), SQL_PARAMETERS):
            for example_id, payload, env in self._conn.execute(
                f"SELECT example_id, payload, env FROM examples WHERE example_id IN ({','.join('?' * len(part))})",
                part,
            ):
                found[example_id] = Example(example_id, orjson.loads(payload), env)
        return found

    def rollouts(self, *, group_id: str | None = None, example_id: str | None = None) -> Iterator[RolloutRecord]:
        """Rollouts in the order they were stored, optionally of one group or example."""
        for rows in self.rollout_rows(group_id=group_id, example_id=example_id):
            rewards = self.rewards_of([row[0] for row in rows])
            for row in rows:
                yield _record(row, rewards.get(row[0], {}), self.env_label)

    def rollout_rows(
        self, *, group_id: str | None = None, example_id: str | None = None, chunk: int = _CHUNK
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Raw rows (``ROLLOUT_COLUMNS``, transcripts still packed) in chunks, by ``seq``."""
        where, params = "", ()
        if group_id is not None or example_id is not None:
            ranges = self._seq_ranges(group_id=group_id, example_id=example_id)
            if not ranges:
                return
            where = "WHERE " + " OR ".join("r.seq BETWEEN ? AND ?" for _ in ranges)
            params = tuple(value for pair in ranges for value in pair)
        cursor = self._conn.execute(
            f"SELECT {ROLLOUT_COLUMNS} FROM {ROLLOUT_SOURCE} {where} ORDER BY r.seq",
            params,
        )
        while rows := cursor.fetchmany(chunk):
            yield rows

    def rollout_rows_between(
        self, first: int, last: int, *, chunk: int = _CHUNK, env: bool = True
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Raw rows (``ROLLOUT_COLUMNS``) whose ``seq`` lies in ``[first, last]``, in chunks; without
        ``env``, the env column is ``NULL`` (each rollout's example is not looked up)."""
        columns = ROLLOUT_COLUMNS if env else _BARE_COLUMNS
        cursor = self._conn.execute(
            f"SELECT {columns} FROM {ROLLOUT_SOURCE} WHERE r.seq BETWEEN ? AND ? ORDER BY r.seq", (first, last)
        )
        while rows := cursor.fetchmany(chunk):
            yield rows

    def _seq_ranges(self, *, group_id: str | None, example_id: str | None) -> list[tuple[int, int]]:
        clauses, params = [], []
        if group_id is not None:
            clauses.append("group_id = ?")
            params.append(group_id)
        if example_id is not None:
            clauses.append("example_id = ?")
            params.append(example_id)
        return [
            (first, last)
            for first, last in self._conn.execute(
                f"SELECT first_seq, last_seq FROM groups WHERE {' AND '.join(clauses)} ORDER BY first_seq", params
            ).fetchall()
        ]

    def rollout(self, rollout_id: str) -> RolloutRecord:
        row = self._conn.execute(
            f"SELECT {ROLLOUT_COLUMNS} FROM {ROLLOUT_SOURCE} WHERE r.rollout_id = ?",
            (rollout_id,),
        ).fetchone()
        if row is None:
            raise KeyError(f"no rollout {rollout_id!r} in {self.path}")
        return _record(row, self.rewards_of([row[0]]).get(row[0], {}), self.env_label)

    def logs(self, *, rollout_id: str | None = None, group_id: str | None = None) -> list[LogEntry]:
        if rollout_id is not None:
            where, params = "WHERE rollout_id = ?", (rollout_id,)
        elif group_id is not None:
            where, params = "WHERE group_id = ? AND rollout_id IS NULL", (group_id,)
        else:
            where, params = "", ()
        rows = self._conn.execute(
            f"SELECT time, level, logger, message, file, line, turn, phase, traceback FROM logs {where} ORDER BY id",
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

    def stats(
        self, *, pass_threshold: float | None = None, examples: int | None = _run_stats.SUMMARY_EXAMPLES
    ) -> _run_stats.RunStats:
        """The run's summary figures (see :class:`RunStats`); ``examples`` lowest-passing examples listed."""
        return _run_stats.run_stats(self._conn, meta=self.run_meta, pass_threshold=pass_threshold, examples=examples)

    def suite(self) -> tuple[EnvFigures, ...]:
        """The run's figures per env, one :class:`EnvFigures` each, in name order (one row for a
        run of one env, named by :attr:`env_label`): a component's mean is never taken across envs."""
        return env_figures(self._conn, self.env_label)

    def envs(self) -> tuple[str | None, ...]:
        """The envs of the run's rollouts, in name order (a mixture's members; the run's own env alone)."""
        return tuple(figures.env for figures in self.suite())

    def short_ids(self, example_ids: Sequence[str], *, among: Sequence[Run] = ()) -> dict[str, str]:
        """``{full id: short id}`` unique in this run (and in each of ``among``, for a table of several runs)."""
        return short_ids([self._conn, *(other._conn for other in among)], example_ids)

    def rewards_of(self, seqs: Sequence[int]) -> dict[int, dict[str, tuple[float, bool]]]:
        """``{seq: {component: (value, filled)}}`` for rollouts given by ``seq`` (read by ranges)."""
        result: dict[int, dict[str, tuple[float, bool]]] = {}
        if not seqs:
            return result
        wanted = set(seqs)
        for low, high in _runs(sorted(wanted)):
            for seq, component, value, filled in self._conn.execute(
                "SELECT seq, component, value, filled FROM rewards WHERE seq BETWEEN ? AND ?", (low, high)
            ):
                if seq in wanted:
                    result.setdefault(seq, {})[component] = (value, bool(filled))
        return result


def open_run(path: str | Path) -> Run:
    """Open a run directory (or its ``run.sqlite``) for reading."""
    return Run(path)


def decode_turns(value: bytes | str | None) -> tuple[TurnRecord, ...]:
    """A rollout's stored turns (``transcripts.turns``) as the records the engine wrote.

    Read through :meth:`TurnRecord.from_dict`, which fills what an older store did
    not write yet with its default and skips what a newer one added.
    """
    return tuple(TurnRecord.from_dict(turn) for turn in _codec.decode(value) or ())


def _runs(values: Sequence[int], gap: int = 64) -> Iterator[tuple[int, int]]:
    """Sorted integers as few ``(low, high)`` ranges (short gaps are read through)."""
    start = previous = values[0]
    for value in values[1:]:
        if value - previous > gap:
            yield start, previous
            start = value
        previous = value
    yield start, previous


def _record(
    row: sqlite3.Row | tuple[Any, ...], rewards: dict[str, tuple[float, bool]], env_label: str | None
) -> RolloutRecord:
    (
        _seq,
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
        scored,
        trace,
        env,
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
        messages=_codec.decode(messages) or [],
        turns=decode_turns(turns),
        sampling=_codec.decode(sampling) if sampling else None,
        scored=bool(scored),
        trace_id=trace,
        env=labelled(env, env_label),
    )
