"""What an engine hands back (a settled group) and what it is given to score again (a stored transcript)."""

from __future__ import annotations

from dataclasses import dataclass

from benchmax.client import CallLog
from benchmax.envs import LogEntry, Message, RolloutOutcome, TurnRecord


@dataclass(frozen=True, slots=True)
class GroupResult:
    """One example's settled siblings, in request order, the group hook's logs, and (when a run's
    ledger counted them: see ``benchmax.client.CallLedger``) the model calls the group made."""

    outcomes: tuple[RolloutOutcome, ...]
    logs: tuple[LogEntry, ...] = ()
    calls: CallLog | None = None

    def by_id(self) -> dict[str, RolloutOutcome]:
        return {outcome.rollout_id: outcome for outcome in self.outcomes}


@dataclass(frozen=True, slots=True)
class StoredRollout:
    """A transcript as a run store kept it, for rescoring."""

    messages: list[Message]
    termination_reason: str
    error: str | None = None
    turns: tuple[TurnRecord, ...] = ()
