"""Exporting a run to files other tools read: JSON Lines (one rollout a line) or Parquet.

Both stream: rollouts are read, written and dropped a chunk at a time, so memory
stays flat however big the run. Transcripts are stored as JSON already, so the
JSON Lines export splices that JSON into each line as is (``orjson.Fragment``)
instead of parsing and re-encoding it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.store import _codec
from benchmax.store._reader import RolloutRecord, Run

FORMATS = ("jsonl", "parquet")
_CHUNK = 2000
_LOG_FIELDS = ("time", "level", "logger", "message", "file", "line", "turn", "phase", "traceback")
_NULL = b"null"


def export_run(run: Run, output: Path, fmt: str = "jsonl") -> int:
    """Write ``run`` to ``output``; returns the number of rollouts written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        return _jsonl(run, output)
    return _parquet(run, output)


def export_rows(run: Run) -> Iterator[list[dict[str, Any]]]:
    """Every rollout as a plain dict (transcripts as raw JSON bytes), with its log records, a chunk at a time."""
    for rows in run.rollout_rows(chunk=_CHUNK):
        seqs = [row[0] for row in rows]
        rewards = run.rewards_of(seqs)
        logs = _logs(run, [row[1] for row in rows])
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
                    "filled": sorted(name for name, (_, filled) in values.items() if filled),
                    "reward": reward,
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
                    "sampling": _codec.unpack_json(sampling) if sampling else _NULL,
                    "logs": logs.get(rollout_id, []),
                }
            )
        yield chunk


def _logs(run: Run, rollout_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    marks = ",".join("?" * len(rollout_ids))
    for rollout_id, *values in run.sql(
        f"SELECT rollout_id, {', '.join(_LOG_FIELDS)} FROM logs WHERE rollout_id IN ({marks}) ORDER BY id",
        list(rollout_ids),
    ):
        result.setdefault(rollout_id, []).append(dict(zip(_LOG_FIELDS, values, strict=True)))
    return result


def _jsonl(run: Run, output: Path) -> int:
    count = 0
    with output.open("wb") as handle:
        for chunk in export_rows(run):
            lines = []
            for row in chunk:
                for key in ("messages", "turns", "sampling"):
                    row[key] = orjson.Fragment(row[key])
                lines.append(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS))
            lines.append(b"")
            handle.write(b"\n".join(lines))
            count += len(chunk)
    return count


def _parquet(run: Run, output: Path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    schema = pa.schema(
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
            ("rewards", pa.string()),
            ("raw_rewards", pa.string()),
            ("filled", pa.list_(pa.string())),
            ("reward", pa.float64()),
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
    count = 0
    with pq.ParquetWriter(output, schema) as writer:
        for chunk in export_rows(run):
            columns: dict[str, list[Any]] = {name: [] for name in schema.names}
            for row in chunk:
                for key in ("rewards", "raw_rewards", "logs"):
                    row[key] = orjson.dumps(row[key], option=orjson.OPT_NON_STR_KEYS).decode()
                for key in ("messages", "turns", "sampling"):
                    row[key] = row[key].decode()
                for name, values in columns.items():
                    values.append(row[name])
            writer.write_batch(
                pa.record_batch(
                    [pa.array(columns[name], schema.field(name).type) for name in schema.names], schema=schema
                )
            )
            count += len(chunk)
    return count


def read_jsonl_export(path: Path) -> Iterator[RolloutRecord]:
    """Read a JSON Lines export back into typed records (logs are dropped)."""
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = orjson.loads(line)
            row.pop("logs", None)
            row["filled"] = frozenset(row["filled"])
            yield RolloutRecord(**row)
