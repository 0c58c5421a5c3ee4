"""The words every reader of a run shares: where a run stands, and what "scored" means."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from benchmax.envs.termination import SCORABLE_REASONS, is_scorable

RunStatus = Literal["running", "completed", "failed", "interrupted"]
"""Where a run stands; every writer of a run sets one of these on every way out."""

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

_LEGACY_STATUSES = {"finished": "completed"}
"""Statuses older writers used, and what they mean now (training wrote ``finished``)."""


def run_status(value: object) -> RunStatus | None:
    """The stored status of a run as one of :data:`RunStatus` (``None`` when unknown).

    Older runs say ``finished`` for a completed training run; that reads as
    ``completed``, so no reader has to know the old spelling.
    """
    if not isinstance(value, str):
        return None
    value = _LEGACY_STATUSES.get(value, value)
    return value if value in RUN_STATUSES else None  # type: ignore[return-value]


def is_scored(termination_reason: str, rewards: Mapping[str, float]) -> bool:
    """A rollout is *scored* when the model loop ended in a scorable way (it finished,
    or stopped at a budget) and its reward hooks produced at least one component.

    Everything else is a failure: an operational error, or a scorable rollout whose
    scoring failed or yielded nothing. The store's ``scored`` column holds this, and
    the summary, the progress display, the inspector and the trainers read it.
    """
    return bool(rewards) and is_scorable(termination_reason)


SCORABLE_SQL = "(" + ", ".join(f"'{reason}'" for reason in sorted(SCORABLE_REASONS)) + ")"
""":data:`SCORABLE_REASONS` as an SQL list, for re-reading version-1 files."""
