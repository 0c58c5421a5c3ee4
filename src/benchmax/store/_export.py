"""Exporting a run to files other tools read: JSON Lines (one rollout a line) or Parquet.

Both stream: rollouts are read, written and dropped a chunk at a time, so memory
stays flat however big the run. Transcripts are stored as JSON already, so the
JSON Lines export splices that JSON into each line as is (``orjson.Fragment``)
instead of parsing and re-encoding it.

Each rollout carries its env (``env``: its example's in a mixture, the run's in a run of
one env, so exports of both compare), its example's fields (``example_args``: the payload beyond
``prompt_messages``, what the reward read) and its ``advantage`` within its group
(``_advantage``, as the inspector shows it). In Parquet the reward components are
real columns, ``reward.<component>`` (after the zero-fill) and
``raw_reward.<component>`` (what the env emitted; null where it was filled), so
a query reads them without parsing JSON; nested values (transcripts, logs,
example fields) stay JSON text. Parquet is zstd-compressed (smaller than snappy
and, here, no slower to write), one row group per part of about 10k rollouts.

The hot loop keeps to few Python objects a rollout: a chunk's rewards, advantages,
example fields and logs are each read with one query and encoded once (an
example's fields once for all its rollouts), and Parquet columns are built from
the rows' values, not from a dict per row.
"""

from __future__ import annotations

import collections
import concurrent.futures
import gc
import multiprocessing
import operator
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from benchmax.envs import TurnRecord, collector_paused, is_scored
from benchmax.store import _codec
from benchmax.store._advantage import group_spread
from benchmax.store._excerpt import example_fields
from benchmax.store._reader import RolloutRecord, Run

FORMATS = ("jsonl", "parquet")
_CHUNK = 2000
_LOG_FIELDS = ("time", "level", "logger", "message", "file", "line", "turn", "phase", "traceback")
_NULL = b"null"
_PARQUET_COMPRESSION = "zstd"


def export_run(run: Run, output: Path, fmt: str = "jsonl", *, workers: int | None = None) -> int:
    """Write ``run`` to ``output``; returns the number of rollouts written.

    Big runs are encoded by ``workers`` processes (default: one per core, up to 8),
    each reading its own ranges of the file and writing each part to a file beside
    ``output``; this process adds the parts in order, with a bounded number in
    flight. On two shared cores a 197k-rollout run exports through the CLI at about
    61k rollouts/s to JSON Lines and 56k/s to Parquet, its second of start-up included.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    with collector_paused():  # millions of short-lived rows, none in a cycle
        return _export(run, output, fmt, workers)


def _export(run: Run, output: Path, fmt: str, workers: int | None) -> int:
    count = len(run)
    cores = os.cpu_count() or 1
    workers = workers or (1 if count < _PARALLEL_FROM else min(cores, 8))
    ranges = _ranges(run)
    components = _components(run)
    if workers == 1:
        parts = (_part(run, fmt, low, high, components) for low, high in ranges)
        return _write_jsonl(output, parts) if fmt == "jsonl" else _write_parquet(output, parts, components)
    # each worker writes its part to a file beside the output and sends the path; this
    # process appends JSON Lines files in the kernel and maps Arrow files, so no part's
    # bytes go through a pipe and a pickle
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.parts-") as spill:
        parts = _parts_in_workers(run.path, fmt, ranges, workers, components, spill)
        return _write_jsonl(output, parts) if fmt == "jsonl" else _write_parquet(output, parts, components)


def _write_jsonl(output: Path, parts: Iterator[tuple[bytes | str, int]]) -> int:
    """Write the parts in order: JSON Lines bytes, or the path of a file holding them."""
    written = 0
    with output.open("wb") as handle:
        for part, rows in parts:
            if isinstance(part, str):
                _append(handle, part)
            else:
                handle.write(part)
            written += rows
    return written


def _append(handle: BinaryIO, path: str) -> None:
    """Add the file at ``path`` to the end of ``handle`` and remove it."""
    handle.flush()
    with open(path, "rb", buffering=0) as part:
        try:
            while os.copy_file_range(part.fileno(), handle.fileno(), 1 << 30):
                pass
        except (AttributeError, OSError):  # no copy_file_range here, or not between these files
            shutil.copyfileobj(part, handle)
    os.unlink(path)


def _components(run: Run) -> tuple[str, ...]:
    """Every reward component of the run: from the per-env sums (a few rows), else (a file written
    before them) from the per-example ones."""
    if run.sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'env_components'"):
        sql = "SELECT DISTINCT component FROM env_components WHERE count > 0 ORDER BY 1"
    else:
        sql = "SELECT DISTINCT component FROM example_components ORDER BY 1"
    return tuple(row[0] for row in run.sql(sql))


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
    db: Path,
    fmt: str,
    ranges: list[tuple[int | None, int | None]],
    workers: int,
    components: tuple[str, ...],
    spill: str,
) -> Iterator[Any]:
    context = multiprocessing.get_context(_start_method())
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_open_source, initargs=(str(db),)
    ) as pool:
        pending: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
        for index, (low, high) in enumerate(ranges):
            path = os.path.join(spill, f"{index}.{fmt}")
            pending.append(pool.submit(_worker_part, fmt, low, high, components, path))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _start_method() -> str:
    """``fork`` where it is safe, else ``spawn``.

    A forked worker starts at once with this process's modules loaded, where a
    spawned one spends a third of a second importing them (a tenth of a 200k-rollout
    export). Forking is safe on Linux from a process with one thread: the worker
    opens its own read-only connection and never touches the inherited one (this
    process holds that open, so SQLite's shared-memory lock stays held through the
    export). Elsewhere, or beside other threads (a server exporting), spawn.
    """
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn"


_source: Run | None = None


def _open_source(path: str) -> None:
    global _source
    gc.disable()  # this process only exports (see export_run)
    _source = Run(path)


def _worker_part(fmt: str, low: int | None, high: int | None, components: tuple[str, ...], path: str) -> Any:
    """A part written to ``path``: JSON Lines, or the Arrow batches in Arrow's stream
    format (which the parent maps and reads without a copy)."""
    assert _source is not None
    part, rows = _part(_source, fmt, low, high, components)
    if fmt == "jsonl":
        with open(path, "wb") as handle:
            handle.write(part)
        return path, rows
    if not part:
        return part, rows
    import pyarrow as pa

    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, part[0].schema) as stream:
        for batch in part:
            stream.write_batch(batch)
    return path, rows


def _part(run: Run, fmt: str, low: int | None, high: int | None, components: tuple[str, ...]) -> tuple[Any, int]:
    """The encoded rollouts of ``seq`` range ``[low, high]`` (``None``: open end): JSON Lines
    bytes, or the Parquet columns as Arrow record batches."""
    if fmt == "jsonl":
        return _jsonl_lines(run, _row_chunks(run, low, high))
    return _arrow_batches(run, _row_chunks(run, low, high), components)


def _row_chunks(run: Run, low: int | None, high: int | None) -> Iterator[list[tuple[Any, ...]]]:
    """The rows in chunks, their env column ``NULL``: each chunk's examples are read once
    (:class:`_Extras`) instead of each rollout's on its own."""
    first = low if low is not None else 0
    return run.rollout_rows_between(first, high if high is not None else 1 << 62, chunk=_CHUNK, env=False)


_Rewards = tuple[dict[str, float], dict[str, float], list[str]]
_NO_REWARDS: _Rewards = ({}, {}, [])


class _Extras:
    """What a chunk of rollout rows needs from the other tables, each read once for the chunk:
    rewards by ``seq`` (after the fill, as emitted, the filled names sorted), advantages,
    each example's fields and each rollout's logs as JSON bytes, and each example's env (``NULL``:
    the run's own, :attr:`Run.env_label`)."""

    __slots__ = ("advantages", "envs", "fields", "logs", "rewards")

    def __init__(self, run: Run, rows: list[tuple[Any, ...]], *, with_logs: bool) -> None:
        first, last = rows[0][0], rows[-1][0]
        self.rewards = _rewards(run, first, last)
        self.advantages = _advantages(run, rows, first, last)
        self.fields, self.envs = _fields(run, {row[3] for row in rows})
        self.logs = _logs(run, [row[1] for row in rows]) if with_logs else {}


def _rewards(run: Run, first: int, last: int) -> dict[int, _Rewards]:
    """``{seq: (rewards, raw_rewards, filled)}`` for the rollouts of ``seq`` range ``[first, last]``."""
    result: dict[int, _Rewards] = {}
    sorting = []
    for seq, component, value, filled in run.sql(
        "SELECT seq, component, value, filled FROM rewards WHERE seq BETWEEN ? AND ?", (first, last)
    ):
        entry = result.get(seq)
        if entry is None:
            entry = result[seq] = ({}, {}, [])
        entry[0][component] = value
        if filled:
            entry[2].append(component)
            sorting.append(entry[2])
        else:
            entry[1][component] = value
    for names in sorting:
        names.sort()
    return result


def _has_logs(run: Run) -> bool:
    """Whether any rollout has log records (most runs have none: their chunks skip the lookup)."""
    return bool(run.sql("SELECT EXISTS (SELECT 1 FROM logs WHERE rollout_id IS NOT NULL)")[0][0])


def _advantages(run: Run, rows: list[tuple[Any, ...]], first: int, last: int) -> dict[int, float]:
    """``{seq: advantage}`` for every rollout of these rows.

    A group whose rollouts all lie in the chunk is figured from the rows at hand;
    one the chunk cuts (or whose ``seq`` span holds other rollouts) is read whole."""
    siblings: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        members = siblings.get(row[2])
        if members is None:
            members = siblings[row[2]] = []
        members.append(row)
    marks = ",".join("?" * len(siblings))
    spans = run.sql(f"SELECT group_id, first_seq, last_seq FROM groups WHERE group_id IN ({marks})", list(siblings))
    result: dict[int, float] = {}
    cut = []
    for group_id, low, high in spans:
        members = siblings[group_id]
        if low >= first and high <= last and len(members) == high - low + 1:
            members.sort(key=_sibling_order)
            spread = group_spread([member[10] for member in members])
            result.update(zip((member[0] for member in members), spread.advantages, strict=True))
        else:
            cut.append((group_id, low, high))
    if cut:
        result.update(_advantages_read(run, cut))
    return result


_sibling_order = operator.itemgetter(4, 0)  # sample_index, seq


def _advantages_read(run: Run, spans: list[tuple[str, int, int]]) -> dict[int, float]:
    """``{seq: advantage}`` for every rollout of these groups (``(group_id, first_seq, last_seq)``), read whole."""
    group_ids = {span[0] for span in spans}
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


def _fields(run: Run, example_ids: set[str]) -> tuple[dict[str, bytes], dict[str, str | None]]:
    """``{example_id: example_args as JSON}`` and ``{example_id: env}`` for these examples."""
    marks = ",".join("?" * len(example_ids))
    found = {}
    envs = {}
    for example_id, payload, env in run.sql(
        f"SELECT example_id, payload, env FROM examples WHERE example_id IN ({marks})", list(example_ids)
    ):
        found[example_id] = orjson.dumps(example_fields(orjson.loads(payload)), option=orjson.OPT_NON_STR_KEYS)
        envs[example_id] = env
    return found, envs


def _logs(run: Run, rollout_ids: Sequence[str]) -> dict[str, bytes]:
    """``{rollout_id: its log records as a JSON list}`` for those of these rollouts that logged."""
    result: dict[str, list[dict[str, Any]]] = {}
    marks = ",".join("?" * len(rollout_ids))
    for rollout_id, *values in run.sql(
        f"SELECT rollout_id, {', '.join(_LOG_FIELDS)} FROM logs WHERE rollout_id IN ({marks}) ORDER BY id",
        list(rollout_ids),
    ):
        result.setdefault(rollout_id, []).append(dict(zip(_LOG_FIELDS, values, strict=True)))
    return {rollout_id: orjson.dumps(records, option=orjson.OPT_NON_STR_KEYS) for rollout_id, records in result.items()}


_EMPTY_OBJECT = b"{}"
_EMPTY_LIST = b"[]"


def _jsonl_lines(run: Run, chunks: Iterator[list[tuple[Any, ...]]]) -> tuple[bytes, int]:
    """The rows as JSON Lines; stored JSON (transcripts, example fields, logs) is spliced in as is."""
    fragment, dumps, texts = orjson.Fragment, orjson.dumps, _codec.unpack_many
    samplings: dict[Any, Any] = {None: fragment(_NULL)}
    with_logs = _has_logs(run)
    label = run.env_label
    lines: list[bytes] = []
    for rows in chunks:
        extras = _Extras(run, rows, with_logs=with_logs)
        rewards, advantages, logs, envs = extras.rewards, extras.advantages, extras.logs, extras.envs
        fields = {example_id: fragment(text) for example_id, text in extras.fields.items()}
        no_fields, no_logs = fragment(_EMPTY_OBJECT), fragment(_EMPTY_LIST)
        columns = list(zip(*rows, strict=True))
        messages, turns = texts(columns[19]), texts(columns[20])
        for row, message_text, turn_text in zip(rows, messages, turns, strict=True):
            seq, rollout_id, example_id, sampling = row[0], row[1], row[3], row[21]
            values, raw, filled = rewards.get(seq, _NO_REWARDS)
            shared = samplings.get(sampling)
            if shared is None:
                shared = samplings[sampling] = fragment(_codec.unpack_repeated(sampling) if sampling else _NULL)
            log_text = logs.get(rollout_id)
            line = {
                "rollout_id": rollout_id,
                "group_id": row[2],
                "example_id": example_id,
                "env": label if (env := envs.get(example_id)) is None else env,
                "sample_index": row[4],
                "step": row[5],
                "batch": row[6],
                "split": row[7],
                "termination_reason": row[8],
                "error": row[9],
                "scored": bool(row[22]),
                "rewards": values,
                "raw_rewards": raw,
                "filled": filled,
                "reward": row[10],
                "advantage": advantages.get(seq, 0.0),
                "example_args": fields.get(example_id, no_fields),
                "prompt_tokens": row[11],
                "completion_tokens": row[12],
                "num_turns": row[13],
                "num_tool_calls": row[14],
                "started_at": row[15],
                "ended_at": row[16],
                "seconds": row[17],
                "final_text": row[18],
                "messages": fragment(message_text),
                "turns": fragment(turn_text),
                "sampling": shared,
                "logs": no_logs if log_text is None else fragment(log_text),
                "trace_id": row[23],
            }
            try:
                lines.append(dumps(line))
            except TypeError:  # a key that is not a string (a reward component stored as a number)
                lines.append(dumps(line, option=orjson.OPT_NON_STR_KEYS))
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
            ("env", pa.string()),
            ("sample_index", pa.int64()),
            ("step", pa.int64()),
            ("batch", pa.int64()),
            ("split", pa.string()),
            ("termination_reason", pa.string()),
            ("error", pa.string()),
            ("scored", pa.bool_()),
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
            ("trace_id", pa.string()),
        ]
    )


def _arrow_batches(
    run: Run, chunks: Iterator[list[tuple[Any, ...]]], components: Sequence[str]
) -> tuple[list[Any], int]:
    """The rows as Arrow record batches, built a column at a time from the rows' values."""
    try:
        import pyarrow as pa
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    schema = _schema(components)
    types = [field.type for field in schema]
    texts = _codec.unpack_many
    samplings: dict[Any, bytes] = {None: _NULL}
    with_logs = _has_logs(run)
    label = run.env_label
    batches = []
    count = 0
    for rows in chunks:
        extras = _Extras(run, rows, with_logs=with_logs)
        rewards, advantages, fields, logs = extras.rewards, extras.advantages, extras.fields, extras.logs
        (
            seqs, rollout_ids, group_ids, example_ids, sample_indexes, steps, batch_numbers, splits, reasons, errors,
            totals, prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, ended_at, seconds,
            final_texts, messages, turns, sampling, scored, trace_ids, _,
        ) = zip(*rows, strict=True)  # fmt: skip
        per_row = [rewards.get(seq, _NO_REWARDS) for seq in seqs]
        for blob in set(sampling) - samplings.keys():
            samplings[blob] = _codec.unpack_repeated(blob) if blob else _NULL
        env_names = [label if (env := extras.envs.get(example_id)) is None else env for example_id in example_ids]
        columns = [
            rollout_ids, group_ids, example_ids, env_names, sample_indexes, steps, batch_numbers, splits, reasons,
            errors, [bool(value) for value in scored], totals,
            *([values.get(name) for values, _, _ in per_row] for name in components),
            *([raw.get(name) for _, raw, _ in per_row] for name in components),
            [filled for _, _, filled in per_row],
            [advantages.get(seq, 0.0) for seq in seqs],
            [fields.get(example_id, _EMPTY_OBJECT) for example_id in example_ids],
            prompt_tokens, completion_tokens, num_turns, num_tool_calls, started_at, ended_at, seconds, final_texts,
            texts(messages), texts(turns), [samplings[blob] for blob in sampling],
            [logs.get(rollout_id, _EMPTY_LIST) for rollout_id in rollout_ids],
            trace_ids,
        ]  # fmt: skip
        arrays = [pa.array(values, kind) for values, kind in zip(columns, types, strict=True)]
        batches.append(pa.record_batch(arrays, schema=schema))
        count += len(rows)
    return batches, count


_UNIQUE_COLUMNS = frozenset(
    ("rollout_id", "started_at", "ended_at", "seconds", "final_text", "messages", "turns", "logs")
)
"""Columns whose values rarely repeat: no dictionary is tried for them (it would be dropped)."""
_TEXT_COLUMNS = frozenset(("final_text", "messages", "turns", "logs", "sampling", "example_args"))
"""Columns of long text: no min/max statistics (no query filters on them)."""


def _write_parquet(output: Path, parts: Iterator[tuple[Any, int]], components: Sequence[str]) -> int:
    """Write the parts in order, one row group each: Arrow batches, or the path of an Arrow stream file."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'benchmax[export]'") from None
    count = 0
    schema = _schema(components)
    with pq.ParquetWriter(
        output,
        schema,
        compression=_PARQUET_COMPRESSION,
        use_dictionary=[name for name in schema.names if name not in _UNIQUE_COLUMNS],
        write_statistics=[name for name in schema.names if name not in _TEXT_COLUMNS],
    ) as writer:
        for part, rows in parts:
            if isinstance(part, str):
                with pa.memory_map(part) as source:
                    writer.write_table(pa.ipc.open_stream(source).read_all())
                os.unlink(part)
            elif part:
                writer.write_table(pa.Table.from_batches(part, schema))
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
            row["turns"] = tuple(TurnRecord.from_dict(turn) for turn in row["turns"] or ())
            if "scored" not in row:  # an export written before the column: its rewards and reason tell
                row["scored"] = is_scored(row["termination_reason"], row["raw_rewards"])
            yield RolloutRecord(**row)
