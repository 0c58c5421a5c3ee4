"""A rollout's advantage within its group: the one definition the inspector and the export share.

A group's siblings answered the same example; what a policy-gradient trainer
learns from is how each did against the others. The advantage is the rollout's
total reward minus its group's mean, divided by the group's (population)
standard deviation, as GRPO normalises it; 0 for every sibling when they all
tie (no learning signal). A rollout without any reward counts as 0, as it does
in every other figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupSpread:
    """A group's mean and standard deviation of total reward, and each sibling's advantage (in order)."""

    mean: float
    std: float
    advantages: tuple[float, ...]


def group_spread(rewards: Sequence[float | None]) -> GroupSpread:
    """The spread of one group's total rewards, given in sibling order."""
    totals = [0.0 if value is None else float(value) for value in rewards]
    if not totals:
        return GroupSpread(0.0, 0.0, ())
    if min(totals) == max(totals):  # a tie is exact: no rounding of the mean may make it signal
        return GroupSpread(totals[0], 0.0, (0.0,) * len(totals))
    mean = sum(totals) / len(totals)
    std = math.sqrt(sum((value - mean) ** 2 for value in totals) / len(totals))
    return GroupSpread(mean, std, tuple((value - mean) / std if std > 0 else 0.0 for value in totals))
