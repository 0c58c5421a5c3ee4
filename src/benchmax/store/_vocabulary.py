"""The words every reader of a run shares: where a run stands (what "scored" means is the contract's
:func:`benchmax.envs.is_scored`)."""

from __future__ import annotations

from typing import Literal, get_args

from benchmax.envs import SCORABLE_REASONS

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


SCORABLE_SQL = "(" + ", ".join(f"'{reason}'" for reason in sorted(SCORABLE_REASONS)) + ")"
""":data:`SCORABLE_REASONS` as an SQL list, for re-reading version-1 files."""
