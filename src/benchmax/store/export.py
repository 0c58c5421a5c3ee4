"""Exporting a run to files other tools read: JSON Lines (one rollout a line) or Parquet."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from benchmax.store.reader import RolloutRecord, Run

FORMATS = ("jsonl", "parquet")


def export_rows(run: Run) -> Iterator[dict[str, Any]]:
    """Every rollout as a plain dict, with its log records."""
    for record in run.rollouts():
        row = record.to_dict()
        row["logs"] = [asdict(entry) for entry in run.logs(rollout_id=record.rollout_id)]
        yield row


def export_run(run: Run, output: Path, fmt: str = "jsonl") -> int:
    """Write ``run`` to ``output``; returns the number of rollouts written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        count = 0
        with output.open("wb") as handle:
            for row in export_rows(run):
                handle.write(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS))
                handle.write(b"\n")
                count += 1
        return count
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    rows = []
    for row in export_rows(run):
        for key in ("messages", "turns", "sampling", "logs", "rewards", "raw_rewards"):
            row[key] = orjson.dumps(row[key], option=orjson.OPT_NON_STR_KEYS).decode()
        rows.append(row)
    pq.write_table(pa.Table.from_pylist(rows), output)
    return len(rows)


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
