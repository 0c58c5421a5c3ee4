"""Reward components as TRL reward functions, with the batch zero-fill.

Each component an env emits becomes its own reward function, so TRL logs its
mean and std on its own (``rewards/<component>/mean``) and a weight can be set
per component. Components may be conditional: one missing from a rollout is
filled with 0.0 wherever another rollout of the same batch (and, in a mixture,
of the same env) emitted it, the rule the run store applies too, and the fill
is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REWARDS_KEY = "benchmax_rewards"
"""The rollout_func output key holding each rollout's (filled) reward dict."""
SCORABLE_KEY = "benchmax_scorable"
"""The key holding whether each rollout was scored (not an operational failure)."""
FILLED_KEY = "benchmax_filled"
"""The key holding, per rollout, the components the zero-fill supplied."""


@dataclass(frozen=True, slots=True)
class FilledRewards:
    rewards: tuple[dict[str, float], ...]
    filled: tuple[tuple[str, ...], ...]
    components: tuple[str, ...]


def zero_fill(rewards: Sequence[Mapping[str, float]], envs: Sequence[str | None] | None = None) -> FilledRewards:
    """Fill every component any rollout of the batch emitted with 0.0 where missing.

    With ``envs`` (each rollout's ``Example.env``, in a mixture) the fill stays
    inside an env: a component is filled only into rollouts of an env whose
    other rollouts emitted it, so one env's component is never a 0.0 for
    another env that does not score it (its value stays missing: ``None`` to
    TRL, which leaves it out of the component's mean and the reward's sum).
    Operational failures (empty dicts) are filled too: they count as zero unless
    the trainer is told to drop them from group statistics. The store applies the
    same rule to the stored batch in SQL (``RunWriter.fill_batch``): the trainer
    needs the filled rewards before anything is stored, and runs without a store.
    """
    components = sorted({name for reward in rewards for name in reward})
    keys = list(envs) if envs is not None else [None] * len(rewards)
    if len(keys) != len(rewards):
        raise ValueError(f"{len(rewards)} rewards but {len(keys)} envs")
    emitted: dict[str | None, set[str]] = {}
    for key, reward in zip(keys, rewards, strict=True):
        emitted.setdefault(key, set()).update(reward)
    filled_rewards = []
    filled_names = []
    for key, reward in zip(keys, rewards, strict=True):
        missing = tuple(name for name in components if name in emitted[key] and name not in reward)
        filled_rewards.append({**{name: 0.0 for name in missing}, **reward})
        filled_names.append(missing)
    return FilledRewards(tuple(filled_rewards), tuple(filled_names), tuple(components))


def component_reward(component: str, *, drop_unscorable: bool = False) -> Callable[..., list[float | None]]:
    """A TRL reward function reading one component from the rollout_func's output.

    Returns ``None`` where the batch never saw the component, and, with
    ``drop_unscorable``, for operational failures: TRL then leaves them out of the
    group baseline and gives them zero advantage, rather than scoring them 0.0.
    """

    def reward(**kwargs: Any) -> list[float | None]:
        rewards = kwargs[REWARDS_KEY]
        scorable = kwargs[SCORABLE_KEY]
        values: list[float | None] = []
        for reward_map, ok in zip(rewards, scorable, strict=True):
            if drop_unscorable and not ok:
                values.append(None)
            else:
                values.append(reward_map.get(component))
        return values

    reward.__name__ = component
    reward.__qualname__ = component
    return reward
