"""Which groups a step trains on: the example draw, and no dead groups.

A group whose siblings all score the same has zero advantage everywhere: it
costs a forward and backward pass and teaches nothing, and in a batch
normalised by token count it dilutes the groups that do teach. With
``dead_groups="drop"`` (the default) such groups are not trained on and the
step is refilled from further examples, up to a bound (DAPO's dynamic
sampling); if the bound is reached first, the step trains on the live groups
it has and the empty slots are masked out of the loss.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmax.envs import RolloutOutcome

DEAD_GROUP_MODES = ("drop", "keep")


def rollout_score(outcome: RolloutOutcome, weights: Mapping[str, float]) -> float:
    """The weighted reward TRL computes for a rollout; a missing component counts 0 (the zero-fill)."""
    return sum(weight * float(outcome.rewards.get(name, 0.0)) for name, weight in weights.items())


def is_dead(outcomes: Sequence[RolloutOutcome], weights: Mapping[str, float], *, drop_unscorable: bool) -> bool:
    """True when the siblings' scores leave no advantage to learn from.

    With ``drop_unscorable`` operational failures are left out of the group
    (TRL gives them no advantage), so a group with fewer than two scored
    siblings is dead too.
    """
    scores = [
        rollout_score(outcome, weights) for outcome in outcomes if outcome.scored or not drop_unscorable
    ]
    if len(scores) < 2:
        return True
    return all(math.isclose(score, scores[0], rel_tol=1e-9, abs_tol=1e-9) for score in scores[1:])


class ExampleSampler:
    """Example ids in shuffled epochs, each id once per epoch, reproducible from ``seed``.

    The bridge draws its own examples (TRL's prompts only say how many groups a
    step holds): a refilled step needs more than TRL handed over, and an async
    step is generated before TRL asks for it.
    """

    def __init__(self, ids: Sequence[str], *, seed: int = 0) -> None:
        if not ids:
            raise ValueError("no examples to draw from")
        self._ids = list(ids)
        self._random = random.Random(seed)
        self._order: list[str] = []
        self.drawn = 0

    def next(self) -> str:
        if not self._order:
            self._order = list(self._ids)
            self._random.shuffle(self._order)
            self._order.reverse()
        self.drawn += 1
        return self._order.pop()


@dataclass(frozen=True, slots=True)
class Selection:
    """The groups of a step in training order; ``masked`` ones fill slots the refill could not."""

    trained: tuple[int, ...]
    masked: tuple[int, ...]
    dead: tuple[int, ...]


def select_groups(dead: Sequence[bool], needed: int, *, mode: str) -> Selection:
    """Pick ``needed`` groups (indices into the draw order) to train on.

    ``keep``: the first ``needed`` drawn, dead or not. ``drop``: live groups in
    draw order; if fewer than ``needed`` are live, dead ones fill the rest and
    are masked out of the loss.
    """
    if mode not in DEAD_GROUP_MODES:
        raise ValueError(f"dead_groups must be 'drop' or 'keep', got {mode!r}")
    dead_indices = tuple(index for index, flag in enumerate(dead) if flag)
    if mode == "keep":
        return Selection(tuple(range(needed)), (), dead_indices)
    live = [index for index, flag in enumerate(dead) if not flag][:needed]
    fill = list(dead_indices[: needed - len(live)])
    return Selection(tuple(live + fill), tuple(fill), dead_indices)
