"""The inspector's single items: one rollout, group or example, whole, with its neighbours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmax.envs import tool_error_ids
from benchmax.store._advantage import group_spread
from benchmax.store._excerpt import example_fields, prompt_excerpt
from benchmax.store._query_base import QueryBase
from benchmax.store._query_rows import _ROW_COLUMNS, _decode, _loads, _mean_std, _rollout_row
from benchmax.store._reader import ROLLOUT_COLUMNS, ROLLOUT_NAMES, ROLLOUT_SOURCE


class ItemQueries(QueryBase):
    """The single items of :class:`~benchmax.store.RunQueries` (which it is part of)."""

    def group(self, group_id: str) -> dict[str, Any] | None:
        """A group with its siblings, their components and advantages, and its own logs."""
        row = self._one(
            "SELECT group_id, example_id, example_idx, batch, step, size, started_at, ended_at, first_seq, last_seq"
            " FROM groups WHERE group_id = ?",
            (group_id,),
        )
        if row is None:
            return None
        names = ("group_id", "example_id", "example_idx", "batch", "step", "size", "started_at", "ended_at")
        group = dict(zip(names, row[:8], strict=True))
        first, last = row[8], row[9]
        rows = self._all(
            f"SELECT {_ROW_COLUMNS} FROM rollouts AS r WHERE r.seq BETWEEN ? AND ? ORDER BY r.sample_index",
            (first, last),
        )
        siblings = [_rollout_row(item, 4000) for item in rows]
        self._label_envs(siblings)
        self._add_short_ids([group, *siblings])
        rewards = self._rewards_by_seq([sibling["seq"] for sibling in siblings])
        spread = group_spread([sibling["reward"] for sibling in siblings])
        mean, std = spread.mean, spread.std
        for sibling, advantage in zip(siblings, spread.advantages, strict=True):
            sibling["rewards"] = rewards.get(sibling["seq"], {})
            sibling["advantage"] = advantage
        components: dict[str, dict[str, float]] = {}
        for name in sorted({name for sibling in siblings for name in sibling["rewards"]}):
            values = [sibling["rewards"].get(name, {}).get("value", 0.0) for sibling in siblings]
            c_mean, c_std = _mean_std(values)
            components[name] = {"mean": c_mean, "std": c_std}
        group.update(
            siblings=siblings,
            mean=mean,
            std=std,
            no_signal=len(siblings) > 1 and std == 0,
            components=components,
            example=self.example(group["example_id"]),
            logs=self._logs("rollout_id IS NULL AND group_id = ?", (group_id,)),
            prev=self._neighbour_group(group, before=True),
            next=self._neighbour_group(group, before=False),
        )
        return group

    def _neighbour_group(self, group: Mapping[str, Any], *, before: bool) -> str | None:
        key = (group["example_idx"], -1 if group["step"] is None else group["step"], group["group_id"])
        op, direction = ("<", "DESC") if before else (">", "ASC")
        row = self._one(
            "SELECT group_id FROM groups WHERE (example_idx, COALESCE(step, -1), group_id) "
            f"{op} (?, ?, ?) ORDER BY example_idx {direction}, COALESCE(step, -1) {direction}, "
            f"group_id {direction} LIMIT 1",
            key,
        )
        return row[0] if row else None

    def example(self, example_id: str) -> dict[str, Any] | None:
        """An example's payload, with its prompt excerpt and the fields its reward reads (``example_args``)."""
        row = self._one("SELECT example_id, idx, split, payload FROM examples WHERE example_id = ?", (example_id,))
        if row is None:
            return None
        payload = _loads(row[3])
        return {
            "example_id": row[0],
            "idx": row[1],
            "split": row[2],
            "payload": payload,
            "prompt": prompt_excerpt(payload),
            "fields": example_fields(payload),
        }

    def rollout(self, rollout_id: str) -> dict[str, Any] | None:
        """Everything stored about one rollout, its logs and its neighbours."""
        row = self._one(f"SELECT {ROLLOUT_COLUMNS} FROM {ROLLOUT_SOURCE} WHERE r.rollout_id = ?", (rollout_id,))
        if row is None:
            return None
        record = dict(zip(ROLLOUT_NAMES, row, strict=True))
        self._label_envs([record])
        record["scored"] = bool(record["scored"])
        self._add_short_ids([record])
        for name in ("messages", "turns", "sampling"):
            record[name] = _decode(record[name])
        record["messages"] = record["messages"] or []
        record["turns"] = record["turns"] or []
        record["rewards"] = self._rewards_by_seq([record["seq"]]).get(record["seq"], {})
        record["logs"] = self._logs("rollout_id = ?", (rollout_id,))
        record["tool_errors"] = sorted(tool_error_ids(turn for turn in record["turns"] if isinstance(turn, dict)))
        example = self.example(record["example_id"])
        record["example_fields"] = example["fields"] if example else {}
        record["cost"] = self._cost(record["seq"])
        seq, group_id, sample = record["seq"], record["group_id"], record["sample_index"]
        first, last = self._one("SELECT first_seq, last_seq FROM groups WHERE group_id = ?", (group_id,)) or (seq, seq)
        siblings = self._all("SELECT seq, reward FROM rollouts WHERE seq BETWEEN ? AND ? ORDER BY sample_index",
                             (first, last))  # fmt: skip
        spread = group_spread([reward for _, reward in siblings])
        record["advantage"] = dict(zip((s for s, _ in siblings), spread.advantages, strict=True)).get(seq, 0.0)
        record["group_mean"] = spread.mean
        nearest = "SELECT rollout_id FROM rollouts WHERE {} ORDER BY {} LIMIT 1"
        record["nav"] = {
            "prev": self._scalar(nearest.format("seq < ?", "seq DESC"), (seq,)),
            "next": self._scalar(nearest.format("seq > ?", "seq"), (seq,)),
            "prev_sibling": self._scalar(
                nearest.format("seq BETWEEN ? AND ? AND sample_index < ?", "sample_index DESC"), (first, last, sample)
            ),
            "next_sibling": self._scalar(
                nearest.format("seq BETWEEN ? AND ? AND sample_index > ?", "sample_index"), (first, last, sample)
            ),
        }
        return record

    def _cost(self, seq: int) -> dict[str, Any] | None:
        """What the rollout's model calls cost (``usd`` ``None``: unknown); ``None`` when the run did not count them."""
        if not self._scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rollout_costs'"):
            return None
        row = self._one("SELECT usd, requests, cache_hits, calls FROM rollout_costs WHERE seq = ?", (seq,))
        if row is None:
            return None
        return {"usd": row[0], "requests": row[1], "cache_hits": row[2], "calls": _loads(row[3]) or []}

    def _logs(self, where: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT id, rollout_id, time, level, levelno, logger, message, file, line, turn, phase, "
            f"traceback FROM logs WHERE {where} ORDER BY id",
            params,
        )
        names = (
            "id", "rollout_id", "time", "level", "levelno", "logger", "message", "file", "line",
            "turn", "phase", "traceback",
        )  # fmt: skip
        return [dict(zip(names, row, strict=True)) for row in rows]
