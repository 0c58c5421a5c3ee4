"""A rescored run's groups: the adopted source's rollouts with their new scores and figures."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from benchmax.envs import is_scored
from benchmax.store import _codec
from benchmax.store._rows import _COMPONENT_UPSERT, _LOG_INSERT, _log_row
from benchmax.store._writes import ScoredGroup, StoreError

dumps = _codec.dumps


def _write_scores(conn: sqlite3.Connection, groups: Sequence[ScoredGroup], threshold: float) -> None:
    """Rows of rescored groups: the source's rollouts with their new scores, the new figures."""
    rollouts, rewards, logs, group_rows, examples, batches, components = [], [], [], [], [], [], []
    example_components: list[tuple[Any, ...]] = []
    for group in groups:
        source = conn.execute(
            "SELECT example_id, example_idx, batch, step, size FROM src.groups WHERE group_id = ?", (group.group_id,)
        ).fetchone()
        if source is None:
            raise StoreError(f"no group {group.group_id!r} in the source run")
        example_id, example_idx, batch, step, size = source
        totals: list[float] = []
        failed = 0
        names: set[str] = set()
        sums: dict[str, list[float]] = {}
        for score in group.scores:
            values = {str(name): float(value) for name, value in score.rewards.items()}
            for name, value in values.items():
                total_count = sums.setdefault(name, [0.0, 0])
                total_count[0] += value
                total_count[1] += 1
            ok = is_scored(score.termination_reason, values, score.scoring_error)
            total = sum(values.values()) if values else None
            rollouts.append((score.termination_reason, score.error, int(ok), total, score.trace_id, score.seq))
            rewards.extend((score.seq, name, value) for name, value in values.items())
            names.update(values)
            totals.append(total if total is not None else 0.0)
            failed += not ok
        seqs = [score.seq for score in group.scores]
        if max(seqs) - min(seqs) + 1 != len(seqs):
            raise StoreError(
                f"group {group.group_id!r} of the source run is not stored in one piece; "
                "resume the source run once (benchmax eval --resume) to upgrade it, then rescore"
            )
        group_rows.append((group, example_id, example_idx, batch, step, size, min(seqs), max(seqs), failed, totals))
        examples.append(
            (example_id, example_idx, len(totals), failed, sum(t >= threshold for t in totals), sum(totals))
        )
        batches.append((batch, len(totals)))
        components.extend((batch, name) for name in names)
        example_components.extend((example_id, name, total, count) for name, (total, count) in sums.items())
        for entry in group.logs:
            logs.append(_log_row(None, group.group_id, entry))
        if any(score.logs for score in group.scores):
            ids = dict(
                conn.execute(
                    f"SELECT seq, rollout_id FROM src.rollouts WHERE seq IN ({','.join('?' * len(seqs))})", seqs
                ).fetchall()
            )
            for score in group.scores:
                logs.extend(_log_row(ids.get(score.seq), group.group_id, entry) for entry in score.logs)
    conn.executemany(
        "INSERT INTO rollouts SELECT r.seq, r.rollout_id, r.group_id, r.example_id, r.sample_index, r.step, r.batch,"
        " r.split, ?, ?, ?, ?, r.prompt_tokens, r.completion_tokens, r.num_turns, r.num_tool_calls, r.started_at,"
        " r.ended_at, r.seconds, r.final_text, ? FROM src.rollouts AS r WHERE r.seq = ?",
        rollouts,
    )
    conn.executemany("INSERT INTO rewards VALUES (?, ?, ?, 0)", rewards)
    # the group's token and time figures are its (unchanged) rollouts', summed in the same statement
    conn.executemany(
        "INSERT INTO groups (group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs,"
        " first_seq, last_seq, failed, reward_sum, reward_sq, low, high, prompt_tokens, completion_tokens,"
        " turns, tool_calls, seconds, first_started_at, last_ended_at)"
        " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(SUM(prompt_tokens), 0),"
        " COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(num_turns), 0), COALESCE(SUM(num_tool_calls), 0),"
        " COALESCE(SUM(seconds), 0.0), MIN(started_at), MAX(ended_at) FROM rollouts WHERE seq BETWEEN ? AND ?",
        [
            (
                group.group_id, example_id, example_idx, batch, step, size, group.started_at, group.ended_at,
                dumps([asdict(entry) for entry in group.logs]) if group.logs else None, first, last, failed,
                sum(totals), sum(t * t for t in totals), min(totals, default=None), max(totals, default=None),
                first, last,
            )
            for group, example_id, example_idx, batch, step, size, first, last, failed, totals in group_rows
        ],
    )  # fmt: skip
    _upsert_figures(conn, examples, batches, components)
    conn.executemany(_COMPONENT_UPSERT, example_components)
    conn.executemany(_LOG_INSERT, logs)


def _upsert_figures(conn: sqlite3.Connection, examples: list[Any], batches: list[Any], components: list[Any]) -> None:
    conn.executemany(
        "INSERT INTO example_figures (example_id, idx, rollouts, failed, passed, reward_sum, groups)"
        " VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (example_id) DO UPDATE SET"
        " rollouts = rollouts + excluded.rollouts, failed = failed + excluded.failed,"
        " passed = passed + excluded.passed, reward_sum = reward_sum + excluded.reward_sum, groups = groups + 1",
        examples,
    )
    conn.executemany(
        "INSERT INTO batches (batch, rollouts) VALUES (?, ?)"
        " ON CONFLICT (batch) DO UPDATE SET rollouts = rollouts + excluded.rollouts",
        batches,
    )
    conn.executemany("INSERT OR IGNORE INTO batch_components VALUES (?, ?)", components)
