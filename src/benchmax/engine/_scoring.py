"""Checking what the scoring hooks return and merging individual with group rewards."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

from benchmax.envs import MAX_REWARD_COMPONENTS, MAX_REWARD_NAME_CHARS, RolloutAttempt


class InvalidRewards(ValueError):
    """A scoring hook returned something other than ``{str: finite number}``."""


def check_rewards(value: object, *, hook: str) -> dict[str, float]:
    """``{component: float}`` from a hook's return value; ``None`` means no components."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRewards(
            f"{hook} must return a dict of {{component: number}}, got {type(value).__name__}"
        )
    if len(value) > MAX_REWARD_COMPONENTS:
        raise InvalidRewards(
            f"{hook} returned {len(value)} reward components, more than the {MAX_REWARD_COMPONENTS} allowed; "
            "return a few named components (per-item detail belongs in the rollout's logs)"
        )
    rewards: dict[str, float] = {}
    for key, raw in value.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidRewards(f"{hook} returned a reward key {key!r:.80}; keys must be non-empty strings")
        if len(key) > MAX_REWARD_NAME_CHARS:
            raise InvalidRewards(
                f"{hook} returned a reward key of {len(key)} characters ({key[:40]!r}...), "
                f"more than the {MAX_REWARD_NAME_CHARS} allowed"
            )
        if not isinstance(raw, numbers.Real):
            raise InvalidRewards(
                f"{hook} returned {key!r}={raw!r:.80} ({type(raw).__name__}); rewards must be numbers"
            )
        try:
            number = float(raw)
        except OverflowError:
            raise InvalidRewards(f"{hook} returned {key!r} as an integer too large for a float") from None
        if not math.isfinite(number):
            raise InvalidRewards(f"{hook} returned {key!r}={number}; rewards must be finite")
        rewards[key] = number
    return rewards


def check_group_rewards(
    value: object, rollouts: Sequence[RolloutAttempt]
) -> dict[str, dict[str, float]]:
    """Group rewards by rollout id, from a mapping by id or a list in rollout order."""
    hook = "compute_group_rewards"
    ids = [rollout.rollout_id for rollout in rollouts]
    if value is None:
        return {}
    if isinstance(value, Mapping):
        given = set(ids)
        unknown = sorted(str(key)[:80] for key in value if key not in given)
        missing = sorted(rollout_id for rollout_id in ids if rollout_id not in value)
        if unknown or missing:
            raise InvalidRewards(
                f"{hook} returned misaligned rollout ids: missing={missing[:5]}, unknown={unknown[:5]}; "
                "return one reward dict for every rollout it was given (an empty dict for none)"
            )
        return {
            str(rollout_id): check_rewards(rewards, hook=f"{hook}[{rollout_id!r}]")
            for rollout_id, rewards in value.items()
        }
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if len(value) != len(ids):
            raise InvalidRewards(
                f"{hook} returned {len(value)} reward dicts for {len(ids)} rollouts; "
                "return one per rollout, in order, or a dict keyed by rollout_id"
            )
        return {
            rollout_id: check_rewards(rewards, hook=f"{hook}[{index}]")
            for index, (rollout_id, rewards) in enumerate(zip(ids, value, strict=True))
        }
    raise InvalidRewards(
        f"{hook} must return {{rollout_id: rewards}} or a list of reward dicts, "
        f"got {type(value).__name__}"
    )


def merge_rewards(individual: Mapping[str, float], group: Mapping[str, float], rollout_id: str) -> dict[str, float]:
    clash = sorted(individual.keys() & group.keys())
    if clash:
        raise InvalidRewards(
            f"compute_reward and compute_group_rewards both produced {clash} for rollout "
            f"{rollout_id!r}; give group components their own names"
        )
    merged = {**individual, **group}
    if len(merged) > MAX_REWARD_COMPONENTS:
        raise InvalidRewards(
            f"compute_reward and compute_group_rewards together produced {len(merged)} components for rollout "
            f"{rollout_id!r}, more than the {MAX_REWARD_COMPONENTS} allowed"
        )
    return merged
