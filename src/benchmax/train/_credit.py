"""Credit per turn: how a rollout's rewards become the advantage of each token it sampled.

Two modes (``TrainConfig.credit``):

* ``outcome`` (the default, GRPO as TRL computes it): one advantage per rollout, its
  outcome (the weighted sum of its reward components) minus its group's mean, over the
  group's std; every token the rollout sampled gets it. Turn rewards do not count.
* ``per_turn``: each model turn ``k`` gets the return
  ``G_k = r_k + gamma * r_{k+1} + gamma^2 * r_{k+2} + ... + R``: its own turn reward
  (``TurnRecord.rewards``, components summed), the discounted turn rewards after it, and
  the rollout's outcome ``R``. A group's baseline is the mean of every return of its
  scored rollouts' turns (and the scale their std): the turn's advantage is its return
  minus that, and exactly the tokens that turn sampled carry it (``TokenSequence.turn_spans``:
  template glue and env/tool tokens between turns carry none).

A rollout that failed operationally (not scored) gets advantage 0 everywhere and is left
out of its group's baseline, as TRL leaves it out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchmax.envs import RolloutOutcome
from benchmax.train._sequences import TokenSequence

CREDIT_MODES = ("outcome", "per_turn")
_EPSILON = 1e-4
"""Added to the group's std before dividing (TRL's own constant)."""


def turn_returns(turn_rewards: Sequence[float], outcome: float, gamma: float) -> list[float]:
    """``G_k`` of each turn: its reward, the later turns' discounted by ``gamma`` per turn, plus the outcome."""
    returns: list[float] = []
    running = 0.0
    for reward in reversed(turn_rewards):
        running = reward + gamma * running
        returns.append(running + outcome)
    return returns[::-1]


def token_advantages(
    sequences: Sequence[TokenSequence],
    outcomes: Sequence[RolloutOutcome],
    rewards: Sequence[float | None],
    group_size: int,
    *,
    mode: str,
    gamma: float = 1.0,
    scale: bool = True,
) -> list[list[float]]:
    """Per rollout, one advantage per token of ``sequences[i].completion_ids``.

    ``rewards`` are the rollouts' outcomes (``None``: not scored), in groups of
    ``group_size`` consecutive siblings.
    """
    if mode not in CREDIT_MODES:
        raise ValueError(f"credit must be one of {', '.join(CREDIT_MODES)}, got {mode!r}")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"the turn discount must be in [0, 1], got {gamma!r}")
    if not len(sequences) == len(outcomes) == len(rewards) or len(rewards) % group_size:
        raise ValueError("token_advantages needs one sequence, outcome and reward per rollout, in whole groups")
    result: list[list[float]] = []
    for first in range(0, len(rewards), group_size):
        rows = range(first, first + group_size)
        per_row: dict[int, list[float]] = {}
        for row in rows:
            outcome = rewards[row]
            if outcome is None:
                continue
            if mode == "outcome":
                per_row[row] = [outcome]
            else:
                spans = sequences[row].turn_spans
                by_index = {turn.index: turn for turn in outcomes[row].turns}
                turn_rewards = [sum((by_index[index].rewards or {}).values()) for index, _, _ in spans]
                per_row[row] = turn_returns(turn_rewards, outcome, gamma)
        values = [value for returns in per_row.values() for value in returns]
        mean = sum(values) / len(values) if values else 0.0
        std = math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        divisor = std + _EPSILON if scale else 1.0
        for row in rows:
            width = len(sequences[row].completion_ids)
            tokens = [0.0] * width
            if row in per_row:
                if mode == "outcome":
                    tokens = [(per_row[row][0] - mean) / divisor] * width
                else:
                    for (_, start, end), value in zip(sequences[row].turn_spans, per_row[row], strict=True):
                        tokens[start:end] = [(value - mean) / divisor] * (end - start)
            result.append(tokens)
    return result
