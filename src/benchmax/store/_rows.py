"""Settled groups as table rows: written in one transaction, or taken out whole before a rewrite.

A group and all its rollouts land together (rows, transcripts, rewards, costs,
search index, logs and the kept figures), so a store holds whole groups only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, replace
from typing import Any

from benchmax.envs import LogEntry, RolloutOutcome, TerminationReason, completion_text, is_scored
from benchmax.store import _codec
from benchmax.store._writes import GroupWrite, StoreError

_LEVELS = {"CRITICAL": 50, "ERROR": 40, "WARNING": 30, "INFO": 20, "DEBUG": 10}
dumps = _codec.dumps


class _Rows:
    """The table rows of the groups of one transaction."""

    def __init__(self, *, scrubbed: bool = False) -> None:
        self.scrubbed = scrubbed
        self.groups: list[tuple[Any, ...]] = []
        self.rollouts: list[tuple[Any, ...]] = []
        self.transcripts: list[tuple[Any, ...]] = []
        self.rewards: list[tuple[Any, ...]] = []
        self.search: list[tuple[Any, ...]] = []
        self.examples: list[tuple[Any, ...]] = []
        self.batches: list[tuple[Any, ...]] = []
        self.components: list[tuple[Any, ...]] = []
        self.example_components: list[tuple[Any, ...]] = []
        self.logs: list[tuple[Any, ...]] = []
        self.costs: list[tuple[Any, ...]] = []
        self.turn_rewards: list[tuple[Any, ...]] = []

    def _text(self, value: Any) -> Any:
        return _codec.scrub(value) if self.scrubbed and isinstance(value, str) else value

    def add(self, group: GroupWrite, seq: int, threshold: float) -> int:
        """Add one group's rows, its rollouts numbered from ``seq``; returns the next free number."""
        first = seq
        totals: list[float] = []
        failed = prompt = completion = turns = tool_calls = 0
        seconds = 0.0
        components: set[str] = set()
        sums: dict[str, list[float]] = {}
        for entry in group.logs:
            self.logs.append(self._log(None, group.group_id, entry))
        costs = group.costs or (None,) * len(group.outcomes)
        for sample, outcome, cost in zip(group.sample_indices, group.outcomes, costs, strict=True):
            total, scored, calls, rewards = self._add_rollout(group, sample, outcome, cost, seq)
            for name, value in rewards.items():
                components.add(name)
                total_count = sums.setdefault(name, [0.0, 0])
                total_count[0] += value
                total_count[1] += 1
            totals.append(total if total is not None else 0.0)
            failed += not scored
            prompt += outcome.usage.prompt_tokens
            completion += outcome.usage.completion_tokens
            turns += len(outcome.turns)
            tool_calls += calls
            seconds += outcome.seconds
            seq += 1
        size = len(group.outcomes)
        passed = sum(total >= threshold for total in totals)
        self.groups.append(
            (
                self._text(group.group_id),
                self._text(group.example_id),
                group.example_idx,
                group.batch,
                group.step,
                size,
                group.started_at,
                group.ended_at,
                self._text(dumps([asdict(entry) for entry in group.logs])) if group.logs else None,
                first,
                seq - 1,
                failed,
                sum(totals),
                sum(total * total for total in totals),
                min(totals, default=None),
                max(totals, default=None),
                prompt,
                completion,
                turns,
                tool_calls,
                seconds,
                min((outcome.started_at for outcome in group.outcomes), default=None),
                max((outcome.ended_at for outcome in group.outcomes), default=None),
            )
        )
        self.examples.append((self._text(group.example_id), group.example_idx, size, failed, passed, sum(totals)))
        self.batches.append((group.batch, size))
        self.components.extend((group.batch, name) for name in components)
        example = self._text(group.example_id)
        self.example_components.extend((example, name, total, count) for name, (total, count) in sums.items())
        return seq

    def _add_rollout(
        self, group: GroupWrite, sample: int, outcome: RolloutOutcome, cost: Any, seq: int
    ) -> tuple[float | None, bool, int, dict[str, float]]:
        """One rollout's rows (its row, transcript, search text, rewards, logs and cost), numbered
        ``seq``; returns its total reward, whether it was scored, its tool calls and its rewards."""
        if cost is not None:
            self.costs.append(
                (seq, cost.usd, cost.requests, cost.cache_hits, self._text(dumps([dict(c) for c in cost.calls])))
            )
        rewards = {self._text(str(name)): float(value) for name, value in outcome.rewards.items()}
        scored = is_scored(outcome.termination_reason, rewards, outcome.scoring_error)
        total = sum(rewards.values()) if rewards else None
        usage = outcome.usage
        calls = sum(turn.tool_calls for turn in outcome.turns)
        final_text = self._text(completion_text(outcome.messages))
        error = self._text(outcome.error)
        rollout_id = self._text(outcome.rollout_id)
        self.rollouts.append(
            (
                seq,
                rollout_id,
                self._text(group.group_id),
                self._text(group.example_id),
                sample,
                group.step,
                group.batch,
                outcome.split,
                self._text(outcome.termination_reason),
                error,
                int(scored),
                total,
                usage.prompt_tokens,
                usage.completion_tokens,
                len(outcome.turns),
                calls,
                outcome.started_at,
                outcome.ended_at,
                outcome.seconds,
                final_text,
                outcome.trace_id,
            )
        )
        self.transcripts.append(
            (
                seq,
                _codec.pack(outcome.messages),
                _codec.pack(outcome.turns),  # orjson writes the slotted dataclasses as asdict() would
                _codec.pack(asdict(outcome.sampling)) if outcome.sampling is not None else None,
            )
        )
        self.search.append(
            (
                seq,
                final_text,
                error or "",
                self._text(_codec.search_text(outcome.messages)),
                f"{rollout_id} {self._text(group.example_id)}",
            )
        )
        self.turn_rewards.extend(
            (seq, self._text(name), value_sum, count) for name, (value_sum, count) in _turn_sums(outcome).items()
        )
        for name, value in rewards.items():
            self.rewards.append((seq, name, value))
        for entry in outcome.logs:
            self.logs.append(self._log(rollout_id, group.group_id, entry))
        return total, scored, calls, rewards

    def _log(self, rollout_id: str | None, group_id: str, entry: LogEntry) -> tuple[Any, ...]:
        return (
            rollout_id,
            self._text(group_id),
            entry.time,
            self._text(entry.level),
            _LEVELS.get(entry.level, 0),
            self._text(entry.logger),
            self._text(entry.message),
            self._text(entry.file),
            entry.line,
            entry.turn,
            self._text(entry.phase),
            self._text(entry.traceback),
        )


def _turn_sums(outcome: RolloutOutcome) -> dict[str, tuple[float, int]]:
    """Each component of the rollout's turn rewards: their sum over its turns, and how many turns gave it."""
    sums: dict[str, tuple[float, int]] = {}
    for turn in outcome.turns:
        for name, value in (turn.rewards or {}).items():
            total, count = sums.get(name, (0.0, 0))
            sums[str(name)] = (total + float(value), count + 1)
    return sums


def insert_rows(conn: sqlite3.Connection, rows: _Rows) -> None:
    conn.executemany(
        "INSERT INTO groups (group_id, example_id, example_idx, batch, step, size, started_at, ended_at, logs,"
        " first_seq, last_seq, failed, reward_sum, reward_sq, low, high, prompt_tokens, completion_tokens,"
        " turns, tool_calls, seconds, first_started_at, last_ended_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows.groups,
    )
    try:
        conn.executemany(
            "INSERT INTO rollouts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.rollouts,
        )
    except sqlite3.IntegrityError as exc:
        raise StoreError(f"a rollout id of these groups is stored already in another group ({exc})") from exc
    conn.executemany("INSERT INTO transcripts VALUES (?, ?, ?, ?)", rows.transcripts)
    conn.executemany("INSERT INTO rewards VALUES (?, ?, ?, 0)", rows.rewards)
    conn.executemany("INSERT INTO rollout_costs VALUES (?, ?, ?, ?, ?)", rows.costs)
    if rows.turn_rewards:
        conn.executemany("INSERT INTO turn_rewards VALUES (?, ?, ?, ?)", rows.turn_rewards)
    conn.executemany(
        "INSERT INTO rollouts_fts (rowid, answer, error, transcript, ids) VALUES (?, ?, ?, ?, ?)", rows.search
    )
    conn.executemany(
        "INSERT INTO example_figures (example_id, idx, rollouts, failed, passed, reward_sum, groups)"
        " VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (example_id) DO UPDATE SET"
        " rollouts = rollouts + excluded.rollouts, failed = failed + excluded.failed,"
        " passed = passed + excluded.passed, reward_sum = reward_sum + excluded.reward_sum, groups = groups + 1",
        rows.examples,
    )
    conn.executemany(
        "INSERT INTO batches (batch, rollouts) VALUES (?, ?)"
        " ON CONFLICT (batch) DO UPDATE SET rollouts = rollouts + excluded.rollouts",
        rows.batches,
    )
    conn.executemany("INSERT OR IGNORE INTO batch_components VALUES (?, ?)", rows.components)
    conn.executemany(_COMPONENT_UPSERT, rows.example_components)
    conn.executemany(
        "INSERT INTO logs (rollout_id, group_id, time, level, levelno, logger, message, "
        "file, line, turn, phase, traceback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows.logs,
    )


def _recount_examples(conn: sqlite3.Connection, examples: str, params: tuple[Any, ...]) -> None:
    """Recompute ``example_components`` of the examples ``examples`` selects (after a fill or a removal)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS recount (example_id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.recount")
    conn.execute(f"INSERT OR IGNORE INTO temp.recount {examples}", params)
    conn.execute("DELETE FROM example_components WHERE example_id IN (SELECT example_id FROM temp.recount)")
    conn.execute(
        "INSERT INTO example_components SELECT g.example_id, w.component, SUM(w.value), COUNT(*)"
        " FROM temp.recount AS x JOIN groups AS g ON g.example_id = x.example_id"
        " JOIN rewards AS w ON w.seq BETWEEN g.first_seq AND g.last_seq GROUP BY g.example_id, w.component"
    )


_COMPONENT_UPSERT = (
    "INSERT INTO example_components (example_id, component, value_sum, count) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (example_id, component) DO UPDATE SET value_sum = value_sum + excluded.value_sum,"
    " count = count + excluded.count"
)

_LOG_INSERT = (
    "INSERT INTO logs (rollout_id, group_id, time, level, levelno, logger, message, "
    "file, line, turn, phase, traceback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _log_row(rollout_id: str | None, group_id: str, entry: LogEntry) -> tuple[Any, ...]:
    return (
        rollout_id, group_id, entry.time, entry.level, _LEVELS.get(entry.level, 0), entry.logger, entry.message,
        entry.file, entry.line, entry.turn, entry.phase, entry.traceback,
    )  # fmt: skip


def _delete_group(conn: sqlite3.Connection, group_seq: int, group_id: str, threshold: float) -> None:
    """Take a stored group out of every table and figure (it is about to be written again)."""
    group = conn.execute(
        "SELECT example_id, batch, size, first_seq, last_seq, failed, reward_sum FROM groups WHERE group_seq = ?",
        (group_seq,),
    ).fetchone()
    example_id, batch, size, first, last, failed, reward_sum = group
    passed = conn.execute(
        "SELECT COUNT(*) FROM rollouts WHERE seq BETWEEN ? AND ? AND COALESCE(reward, 0) >= ?", (first, last, threshold)
    ).fetchone()[0]
    for seq, final_text, error, rollout_id, messages in conn.execute(
        "SELECT r.seq, r.final_text, r.error, r.rollout_id, t.messages FROM rollouts AS r"
        " JOIN transcripts AS t ON t.seq = r.seq WHERE r.seq BETWEEN ? AND ?",
        (first, last),
    ).fetchall():
        conn.execute(
            "INSERT INTO rollouts_fts (rollouts_fts, rowid, answer, error, transcript, ids)"
            " VALUES ('delete', ?, ?, ?, ?, ?)",
            (
                seq,
                final_text,
                error or "",
                _codec.search_text(_codec.decode(messages) or []),
                f"{rollout_id} {example_id}",
            ),
        )
    for table in ("rollouts", "transcripts", "rewards", "rollout_costs", "turn_rewards"):
        conn.execute(f"DELETE FROM {table} WHERE seq BETWEEN ? AND ?", (first, last))
    conn.execute("DELETE FROM logs WHERE group_id = ?", (group_id,))
    conn.execute("DELETE FROM groups WHERE group_seq = ?", (group_seq,))
    conn.execute(
        "UPDATE example_figures SET rollouts = rollouts - ?, failed = failed - ?, passed = passed - ?,"
        " reward_sum = reward_sum - ?, groups = groups - 1 WHERE example_id = ?",
        (size, failed, passed, reward_sum, example_id),
    )
    conn.execute("DELETE FROM example_figures WHERE example_id = ? AND groups <= 0", (example_id,))
    _recount_examples(conn, "SELECT ?", (example_id,))
    conn.execute("UPDATE batches SET rollouts = rollouts - ? WHERE batch = ?", (size, batch))


def _group_fault(error: BaseException) -> bool:
    """Whether ``error`` comes from what a group holds (a number past 64 bits, a value SQLite or
    the codec cannot take), rather than from the database or the process."""
    if isinstance(error, sqlite3.IntegrityError | sqlite3.DataError | sqlite3.InterfaceError):
        return True
    return isinstance(error, Exception) and not isinstance(error, sqlite3.DatabaseError | MemoryError)


_STORE_FAILURE = TerminationReason.HARNESS_ERROR


def _stand_in(group: GroupWrite, error: Exception) -> GroupWrite:
    """``group`` as failed rollouts saying why the store could not keep it: ids, times and
    dataset position kept; transcripts, turns, rewards, logs and costs left out."""
    why = f"{type(error).__name__}: {error}"
    if len(why) > 500:
        why = f"{why[:497]}..."
    reason = (
        f"the run store could not keep this rollout as it came ({why}); it is stored as failed, without its transcript"
    )
    outcomes = tuple(
        RolloutOutcome(
            rewards={},
            termination_reason=_STORE_FAILURE,
            error=reason,
            rollout_id=str(outcome.rollout_id),
            example_id=str(outcome.example_id),
            split=outcome.split,
            started_at=float(outcome.started_at),
            ended_at=float(outcome.ended_at),
        )
        for outcome in group.outcomes
    )
    return replace(group, outcomes=outcomes, logs=(), costs=())
