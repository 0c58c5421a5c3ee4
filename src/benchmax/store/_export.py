"""Exporting a run to files other tools read: JSON Lines (one rollout a line) or Parquet.

Both stream: rollouts are read, written and dropped a chunk at a time, so memory
stays flat however big the run. Transcripts are stored as JSON already, so the
JSON Lines export splices that JSON into each line as is (``orjson.Fragment``)
instead of parsing and re-encoding it.

Each rollout carries its example's fields (``example_args``: the payload beyond
``prompt_messages``, what the reward read) and its ``advantage`` within its group
(``_advantage``, as the inspector shows it). In Parquet the reward components are
real columns, ``reward.<component>`` (after the zero-fill) and
``raw_reward.<component>`` (what the env emitted; null where it was filled), so
a query reads them without parsing JSON; nested values (transcripts, logs,
example fields) stay JSON text.
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.store import _codec
from benchmax.store._advantage import group_spread
from benchmax.store._excerpt import example_fields
from benchmax.store._reader import RolloutRecord, Run

FORMATS = ("jsonl", "parquet")
_CHUNK = 2000
_LOG_FIELDS = ("time", "level", "logger", "message", "file", "line", "turn", "phase", "traceback")
_NULL = b"null"


def export_run(run: Run, output: Path, fmt: str = "jsonl", *, workers: int | None = None) -> int:
    """Write ``run`` to ``output``; returns the number of rollouts written.

    Big runs are encoded by ``workers`` processes (default: one per core, up to 8),
    each reading its own ranges of the file; this process writes their parts in
    order, with a bounded number of parts in flight. Two workers beat this process
    alone on two cores too: JSON Lines 51k rollouts/s against 38k (bench/scale.py).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    count = len(run)
    cores = os.cpu_count() or 1
    workers = workers or (1 if count < _PARALLEL_FROM else min(cores, 8))
    ranges = _ranges(run)
    components = _components(run)
    parts: Iterator[Any] = (
        _parts_in_workers(run.path, fmt, ranges, workers, components)
        if workers > 1
        else (_part(run, fmt, low, high, components) for low, high in ranges)
    )
    if fmt == "jsonl":
        written = 0
        with output.open("wb") as handle:
            for lines, rows in parts:
                handle.write(lines)
                written += rows
        return written
    return _write_parquet(output, parts, components)


def _components(run: Run) -> tuple[str, ...]:
    """Every reward component of the run (from the per-example sums: a small table)."""
    return tuple(row[0] for row in run.sql("SELECT DISTINCT component FROM example_components ORDER BY 1"))


_PARALLEL_FROM = 50_000
_PART_ROLLOUTS = 10_000


def _ranges(run: Run) -> list[tuple[int | None, int | None]]:
    """``seq`` ranges of about ``_PART_ROLLOUTS`` rollouts, whole groups each."""
    ranges: list[tuple[int | None, int | None]] = []
    start = None
    for first, last in run.sql("SELECT first_seq, last_seq FROM groups ORDER BY first_seq"):
        start = first if start is None else start
        if last - start + 1 >= _PART_ROLLOUTS:
            ranges.append((start, last))
            start = None
    if start is not None:
        ranges.append((start, None))
    return ranges or [(None, None)]


def _parts_in_workers(
    db: Path, fmt: str, ranges: list[tuple[int | None, int | None]], workers: int, components: tuple[str, ...]
) -> Iterator[Any]:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_open_source, initargs=(str(db),)
    ) as pool:
        pending: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
        for low, high in ranges:
            pending.append(pool.submit(_worker_part, fmt, low, high, components))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


_source: Run | None = None


def _open_source(path: str) -> None:
    global _source
    _source = Run(path)


def _worker_part(fmt: str, low: int | None, high: int | None, components: tuple[str, ...]) -> Any:
    assert _source is not None
    return _part(_source, fmt, low, high, components)


def _part(run: Run, fmt: str, low: int | None, high: int | None, components: tuple[str, ...]) -> tuple[Any, int]:
    """The encoded rollouts of ``seq`` range ``[low, high]`` (``None``: open end): JSON Lines
    bytes, or the Parquet columns as Arrow record batches."""
    if fmt == "jsonl":
        return _jsonl_lines(export_rows(run, low, high))
    return _arrow_batches(export_rows(run, low, high), components)


def export_rows(run: Run, low: int | None = None, high: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """Every rollout as a plain dict (transcripts as raw JSON bytes), with its log records, a chunk at a time."""
    if low is None and high is None:
        chunks = run.rollout_rows(chunk=_CHUNK)
    else:
        chunks = run.rollout_rows_between(low if low is not None else 0, high if high is not None else 1 << 62)
    for rows in chunks:
        seqs = [row[0] for row in rows]
        rewards = run.rewards_of(seqs)
        logs = _logs(run, [row[1] for row in rows])
        advantages = _advantages(run, {row[2] for row in rows})
        fields = _fields(run, {row[3] for row in rows})
        chunk = []
        for row in rows:
            (
                seq, rollout_id, group_id, example_id, sample_index, step, batch, split, reason, error, reward,
                prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, ended_at, seconds,
                final_text, messages, turns, sampling,
            ) = row  # fmt: skip
            values = rewards.get(seq, {})
            chunk.append(
                {
                    "rollout_id": rollout_id,
                    "group_id": group_id,
                    "example_id": example_id,
                    "sample_index": sample_index,
                    "step": step,
                    "batch": batch,
                    "split": split,
                    "termination_reason": reason,
                    "error": error,
                    "rewards": {name: value for name, (value, _) in values.items()},
                    "raw_rewards": {name: value for name, (value, filled) in values.items() if not filled},
                    "filled": sorted([name for name, (_, filled) in values.items() if filled]),
                    "reward": reward,
                    "advantage": advantages.get(seq, 0.0),
                    "example_args": fields.get(example_id, {}),
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "num_turns": num_turns,
                    "num_tool_calls": num_tool_calls,
                    "started_at": started_at,
                    "ended_at": ended_at,
                    "seconds": seconds,
                    "final_text": final_text,
                    "messages": _codec.unpack_json(messages) or b"[]",
                    "turns": _codec.unpack_json(turns) or b"[]",
                    "sampling": _codec.unpack_repeated(sampling) if sampling else _NULL,
                    "logs": logs.get(rollout_id, []),
                }
            )
        yield chunk


def _advantages(run: Run, group_ids: set[str]) -> dict[int, float]:
    """``{seq: advantage}`` for every rollout of these groups, read whole (a chunk may cut a group)."""
    marks = ",".join("?" * len(group_ids))
    spans = run.sql(f"SELECT group_id, first_seq, last_seq FROM groups WHERE group_id IN ({marks})", list(group_ids))
    if not spans:
        return {}
    low, high = min(span[1] for span in spans), max(span[2] for span in spans)
    siblings: dict[str, list[tuple[int, int, float | None]]] = {}
    for seq, group_id, sample_index, reward in run.sql(
        "SELECT seq, group_id, sample_index, reward FROM rollouts WHERE seq BETWEEN ? AND ?", (low, high)
    ):
        if group_id in group_ids:
            siblings.setdefault(group_id, []).append((sample_index, seq, reward))
    result: dict[int, float] = {}
    for rows in siblings.values():
        rows.sort()
        spread = group_spread([reward for _, _, reward in rows])
        result.update(zip((seq for _, seq, _ in rows), spread.advantages, strict=True))
    return result


def _fields(run: Run, example_ids: set[str]) -> dict[str, dict[str, Any]]:
    """``{example_id: example_args}`` for these examples."""
    marks = ",".join("?" * len(example_ids))
    found = {}
    for example_id, payload in run.sql(
        f"SELECT example_id, payload FROM examples WHERE example_id IN ({marks})", list(example_ids)
    ):
        found[example_id] = example_fields(orjson.loads(payload))
    return found


def _logs(run: Run, rollout_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    marks = ",".join("?" * len(rollout_ids))
    for rollout_id, *values in run.sql(
        f"SELECT rollout_id, {', '.join(_LOG_FIELDS)} FROM logs WHERE rollout_id IN ({marks}) ORDER BY id",
        list(rollout_ids),
    ):
        result.setdefault(rollout_id, []).append(dict(zip(_LOG_FIELDS, values, strict=True)))
    return result


def _jsonl_lines(chunks: Iterator[list[dict[str, Any]]]) -> tuple[bytes, int]:
    lines: list[bytes] = []
    for chunk in chunks:
        for row in chunk:
            for key in ("messages", "turns", "sampling"):
                row[key] = orjson.Fragment(row[key])
            lines.append(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS))
    if lines:
        lines.append(b"")
    return b"\n".join(lines), len(lines) - 1 if lines else 0


def _schema(components: Sequence[str]) -> Any:
    import pyarrow as pa

    rewards = [(f"reward.{name}", pa.float64()) for name in components]
    raw = [(f"raw_reward.{name}", pa.float64()) for name in components]
    return pa.schema(
        [
            ("rollout_id", pa.string()),
            ("group_id", pa.string()),
            ("example_id", pa.string()),
            ("sample_index", pa.int64()),
            ("step", pa.int64()),
            ("batch", pa.int64()),
            ("split", pa.string()),
            ("termination_reason", pa.string()),
            ("error", pa.string()),
            ("reward", pa.float64()),
            *rewards,
            *raw,
            ("filled", pa.list_(pa.string())),
            ("advantage", pa.float64()),
            ("example_args", pa.string()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("num_turns", pa.int64()),
            ("num_tool_calls", pa.int64()),
            ("started_at", pa.float64()),
            ("ended_at", pa.float64()),
            ("seconds", pa.float64()),
            ("final_text", pa.string()),
            ("messages", pa.string()),
            ("turns", pa.string()),
            ("sampling", pa.string()),
            ("logs", pa.string()),
        ]
    )


def _arrow_batches(chunks: Iterator[list[dict[str, Any]]], components: Sequence[str]) -> tuple[list[Any], int]:
    try:
        import pyarrow as pa
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    schema = _schema(components)
    batches = []
    count = 0
    for chunk in chunks:
        columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        for row in chunk:
            rewards, raw = row.pop("rewards"), row.pop("raw_rewards")
            for name in components:
                row[f"reward.{name}"] = rewards.get(name)
                row[f"raw_reward.{name}"] = raw.get(name)
            for key in ("example_args", "logs"):
                row[key] = orjson.dumps(row[key], option=orjson.OPT_NON_STR_KEYS).decode()
            for key in ("messages", "turns", "sampling"):
                row[key] = row[key].decode()
            for name, values in columns.items():
                values.append(row[name])
        arrays = [pa.array(columns[name], schema.field(name).type) for name in schema.names]
        batches.append(pa.record_batch(arrays, schema=schema))
        count += len(chunk)
    return batches, count


def _write_parquet(output: Path, parts: Iterator[tuple[list[Any], int]], components: Sequence[str]) -> int:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    count = 0
    with pq.ParquetWriter(output, _schema(components)) as writer:
        for batches, rows in parts:
            for batch in batches:
                writer.write_batch(batch)
            count += rows
    return count


def read_jsonl_export(path: Path) -> Iterator[RolloutRecord]:
    """Read a JSON Lines export back into typed records (logs, example fields and advantages are dropped)."""
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = orjson.loads(line)
            for key in ("logs", "example_args", "advantage"):
                row.pop(key, None)
            row["filled"] = frozenset(row["filled"])
            yield RolloutRecord(**row)
