"""Grow a finished ``scale.py`` run N-fold, for measuring reads at scale without hours of eval.

Copies a finished single-env run of ``bench/scenario.py:AddEnv`` (``scale.py --rollouts K``)
into a new run directory and adds N-1 more copies of its groups, rollouts, transcripts,
rewards, costs and per-example figures, each under the example ids the bigger dataset
(``AddEnv(examples=N x K/4)``) has at those positions, so ``benchmax eval --resume`` of the
result finds its dataset unchanged (ids, size, digest) and every group stored. The copies keep
the source's transcripts (their numbers are the source examples'), and the full-text index is
not copied (text search over the copies finds nothing). The run's stored config and
provenance are rewritten for the bigger dataset. What this measures honestly: whatever
reads the store (resume, the inspector, export); not eval throughput.

    python bench/replicate_run.py SOURCE_RUN_DIR TARGET_RUN_DIR --times 10
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scenario import _rows  # noqa: E402

from benchmax.envs import ListDataset  # noqa: E402


def _meta(conn: sqlite3.Connection, key: str) -> object:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else orjson.loads(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: object) -> None:
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (orjson.dumps(value).decode(), key))


def replicate(source: Path, target: Path, times: int) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    src = sqlite3.connect(f"{(source / 'run.sqlite').as_uri()}?mode=ro", uri=True)
    src.execute(f"VACUUM INTO '{target / 'run.sqlite'}'")
    src.close()
    conn = sqlite3.connect(target / "run.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA cache_size=-262144")
    examples = conn.execute("SELECT COUNT(*) FROM examples").fetchone()[0]
    rollouts = conn.execute("SELECT MAX(seq) + 1 FROM rollouts").fetchone()[0]  # the span of seq numbers
    if conn.execute("SELECT COUNT(DISTINCT batch) FROM groups").fetchone()[0] != 1:
        raise SystemExit("the source run has several batches; this copies runs of one batch")
    clock = time.perf_counter()
    dataset = ListDataset(_rows(examples * times))
    ids = list(dataset._known_ids() or ())
    digest = dataset._content_digest()
    print(f"dataset of {len(ids):,} named in {time.perf_counter() - clock:.1f} s", flush=True)
    conn.execute("BEGIN")
    conn.execute("CREATE TEMP TABLE names (idx INTEGER PRIMARY KEY, example_id TEXT NOT NULL)")
    conn.executemany("INSERT INTO temp.names VALUES (?, ?)", enumerate(ids))
    conn.executemany(
        "INSERT INTO examples (example_id, idx, split, payload, env) VALUES (?, ?, 'eval', ?, NULL)",
        ((ids[index], index, orjson.dumps(dataset[index].payload).decode()) for index in range(examples, len(ids))),
    )
    for copy in range(1, times):
        shift, offset = copy * rollouts, copy * examples
        clock = time.perf_counter()
        # the source's examples by position, and the copy's ids at the shifted positions
        conn.execute("DROP TABLE IF EXISTS temp.map")
        conn.execute(
            "CREATE TEMP TABLE map AS SELECT e.example_id AS old, n.example_id AS new FROM examples AS e"
            " JOIN temp.names AS n ON n.idx = e.idx + ? WHERE e.idx < ?",
            (offset, examples),
        )
        conn.execute("CREATE UNIQUE INDEX temp.map_old ON map (old)")
        conn.execute(
            "INSERT INTO rollouts SELECT r.seq + ?, 'eval/' || m.new || '#' || r.sample_index, 'eval/' || m.new, m.new,"
            " r.sample_index, r.step, r.batch, r.split, r.termination_reason, r.error, r.scored, r.reward,"
            " r.prompt_tokens, r.completion_tokens, r.num_turns, r.num_tool_calls, r.started_at, r.ended_at,"
            " r.seconds, r.final_text, r.trace_id FROM rollouts AS r JOIN temp.map AS m ON m.old = r.example_id"
            " WHERE r.seq < ? ORDER BY r.seq",
            (shift, rollouts),
        )
        for table in ("transcripts", "rollout_costs"):
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            rest = ", ".join(columns[1:])
            conn.execute(f"INSERT INTO {table} SELECT seq + ?, {rest} FROM {table} WHERE seq < ?", (shift, rollouts))
        conn.execute(
            "INSERT INTO rewards SELECT seq + ?, component, value, filled FROM rewards WHERE seq < ?", (shift, rollouts)
        )
        columns = [row[1] for row in conn.execute("PRAGMA table_info(groups)")][1:]
        replaced = {
            "group_id": "'eval/' || m.new", "example_id": "m.new", "example_idx": "g.example_idx + ?",
            "first_seq": "g.first_seq + ?", "last_seq": "g.last_seq + ?",
        }  # fmt: skip
        conn.execute(
            f"INSERT INTO groups ({', '.join(columns)}) SELECT"
            f" {', '.join(replaced.get(name, f'g.{name}') for name in columns)}"
            " FROM groups AS g JOIN temp.map AS m ON m.old = g.example_id WHERE g.first_seq < ? ORDER BY g.first_seq",
            (offset, shift, shift, rollouts),
        )
        conn.execute(
            "INSERT INTO example_figures SELECT m.new, f.idx + ?, f.rollouts, f.failed, f.passed, f.reward_sum,"
            " f.groups FROM example_figures AS f JOIN temp.map AS m ON m.old = f.example_id",
            (offset,),
        )
        conn.execute(
            "INSERT INTO example_components SELECT m.new, c.component, c.value_sum, c.count"
            " FROM example_components AS c JOIN temp.map AS m ON m.old = c.example_id"
        )
        print(f"copy {copy}: {time.perf_counter() - clock:.1f} s", flush=True)
    conn.execute("UPDATE batches SET rollouts = rollouts * ?, filled_rollouts = filled_rollouts * ?", (times, times))
    conn.execute("DELETE FROM figures")  # the whole-run figures the writer kept describe the source
    config = _meta(conn, "config")
    assert isinstance(config, dict)
    config["env_kwargs"] = {**config.get("env_kwargs", {}), "examples": examples * times}
    config["run_dir"] = str(target)
    _set_meta(conn, "config", config)
    _set_meta(conn, "dataset_size", examples * times)
    provenance = _meta(conn, "provenance")
    if isinstance(provenance, dict) and isinstance(provenance.get("data"), dict):
        provenance["data"]["examples_sha256"] = digest
        _set_meta(conn, "provenance", provenance)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--times", type=int, default=10)
    args = parser.parse_args()
    clock = time.perf_counter()
    replicate(args.source, args.target, args.times)
    print(f"done in {time.perf_counter() - clock:.1f} s: {args.target}")


if __name__ == "__main__":
    main()
