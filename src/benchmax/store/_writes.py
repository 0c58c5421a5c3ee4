"""What the run store's writer accepts: settled groups, rescored groups and their costs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax.envs import LogEntry, RolloutOutcome
from benchmax.errors import BenchmaxError


class StoreError(BenchmaxError, RuntimeError):
    """The run directory cannot be used as asked (exists already, missing, other run)."""


@dataclass(frozen=True, slots=True)
class RolloutCost:
    """What one rollout's model calls cost: ``usd`` ``None`` is unknown (a model without a price).

    ``requests`` went to a model server, ``cache_hits`` were answered by the
    response cache; ``calls`` are the figures per role and model (JSON objects).
    """

    usd: float | None
    requests: int = 0
    cache_hits: int = 0
    calls: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupWrite:
    """One settled group, ready to store; ``costs`` (when given) has one entry per outcome."""

    group_id: str
    example_id: str
    example_idx: int
    batch: int
    outcomes: tuple[RolloutOutcome, ...]
    sample_indices: tuple[int, ...]
    logs: tuple[LogEntry, ...] = ()
    step: int | None = None
    started_at: float = 0.0
    ended_at: float = 0.0
    costs: tuple[RolloutCost | None, ...] = ()

    def __post_init__(self) -> None:
        if self.costs and len(self.costs) != len(self.outcomes):
            raise ValueError(f"group {self.group_id}: {len(self.costs)} costs for {len(self.outcomes)} outcomes")


@dataclass(frozen=True, slots=True)
class RolloutScore:
    """A stored rollout scored again: what changed, keyed by its ``seq`` in the source run."""

    seq: int
    termination_reason: str
    error: str | None
    rewards: Mapping[str, float]
    logs: tuple[LogEntry, ...] = ()
    scoring_error: str | None = None
    """Why a scoring hook failed (see :attr:`benchmax.envs.RolloutOutcome.scoring_error`)."""
    trace_id: str | None = None
    """The OpenTelemetry trace of this scoring, when it was traced (the source's trace is not this one)."""

    def __reduce__(self) -> tuple[Any, ...]:
        # a rescore's workers send these by the thousand; the default pickling of a
        # slotted dataclass walks its fields in Python on both sides
        return (
            RolloutScore,
            (self.seq, self.termination_reason, self.error, self.rewards, self.logs, self.scoring_error, self.trace_id),
        )


@dataclass(frozen=True, slots=True)
class ScoredGroup:
    """A source group scored again; everything else is copied from the source run."""

    group_id: str
    scores: tuple[RolloutScore, ...]
    logs: tuple[LogEntry, ...] = ()
    started_at: float = 0.0
    ended_at: float = 0.0

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScoredGroup, (self.group_id, self.scores, self.logs, self.started_at, self.ended_at))
