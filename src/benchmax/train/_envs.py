"""Per-env figures of a training run on a mixture: each step's, and the held-out eval's.

In a mixture every example names its env (``Example.env``). A group is one
example's siblings, so one env; a step's figures are kept apart per env so one
env learning cannot hide another stalling. A component counts only among the
rollouts of the envs that emit it: ``exact`` of a math env is not a 0.0 for a
code env that never scores ``exact``.

Figures travel twice: as flat numbers in TRL's log (``env/<name>/reward``,
``env/<name>/rewards/<component>``, ...; what ``metrics.jsonl`` and the curves
read) and as :class:`EnvStep` records in the run store's ``steps`` row under
``"envs"`` (what the inspector reads). A run of one env (``Example.env`` unset)
logs neither: its figures stay what they were.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs import RolloutOutcome
from benchmax.train._groups import rollout_score
from benchmax.train._rewards import zero_fill

ENV_PREFIX = "env/"
"""Flat log keys of per-env figures start with this, then the env's name."""
_COUNTS = ("rollouts", "scored", "groups_drawn", "groups_dead")
_COMPONENTS = "/rewards/"


@dataclass(frozen=True, slots=True)
class EnvStep:
    """One env's part of a training step: everything the step generated for it
    (dropped dead groups included), as :class:`StepReport` figures are.

    ``reward`` is the weighted sum the trainer trains on, averaged over the env's
    rollouts; ``components`` holds the mean of each component the env's rollouts
    emitted (zero-filled among them only); ``groups_dead`` counts its groups
    whose siblings all scored the same (no signal)."""

    env: str
    reward: float | None
    components: Mapping[str, float] = field(default_factory=dict)
    rollouts: int = 0
    scored: int = 0
    groups_drawn: int = 0
    groups_dead: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "components": dict(self.components),
            "rollouts": self.rollouts,
            "scored": self.scored,
            "groups_drawn": self.groups_drawn,
            "groups_dead": self.groups_dead,
        }

    @classmethod
    def from_json(cls, env: str, data: Mapping[str, Any]) -> EnvStep:
        reward = data.get("reward")
        return cls(
            env,
            None if reward is None else float(reward),
            {str(name): float(value) for name, value in dict(data.get("components") or {}).items()},
            **{name: int(data.get(name) or 0) for name in _COUNTS},
        )

    def logs(self) -> dict[str, float]:
        """The flat keys TRL's log carries for this env."""
        prefix = f"{ENV_PREFIX}{self.env}"
        flat = {f"{prefix}/{name}": float(getattr(self, name)) for name in _COUNTS}
        if self.reward is not None:
            flat[f"{prefix}/reward"] = self.reward
        for name, value in self.components.items():
            flat[f"{prefix}{_COMPONENTS}{name}"] = value
        return flat


def step_envs(
    groups: Sequence[tuple[str | None, Sequence[RolloutOutcome], bool]],
    weights: Mapping[str, float],
) -> tuple[EnvStep, ...]:
    """Each env's figures from the step's ``(env, siblings, dead)`` groups; ``()`` when no
    group names an env (a run of one env)."""
    by_env: dict[str, list[tuple[Sequence[RolloutOutcome], bool]]] = {}
    for env, outcomes, dead in groups:
        if env is not None:
            by_env.setdefault(env, []).append((outcomes, dead))
    figures = []
    for env in sorted(by_env):
        entries = by_env[env]
        outcomes = [outcome for siblings, _ in entries for outcome in siblings]
        fill = zero_fill([outcome.rewards for outcome in outcomes])
        figures.append(
            EnvStep(
                env,
                _mean([rollout_score(outcome, weights) for outcome in outcomes]),
                {name: sum(reward[name] for reward in fill.rewards) / len(fill.rewards) for name in fill.components},
                rollouts=len(outcomes),
                scored=sum(outcome.scored for outcome in outcomes),
                groups_drawn=len(entries),
                groups_dead=sum(dead for _, dead in entries),
            )
        )
    return tuple(figures)


def envs_from_logs(logs: Mapping[str, Any]) -> tuple[EnvStep, ...]:
    """The :class:`EnvStep` records a step's flat log holds (its ``env/...`` keys), by env name.

    An env's name may hold ``/``: names are found from the ``/rollouts`` key every
    env logs, then each name's own keys are read under its prefix."""
    names = sorted(
        key[len(ENV_PREFIX) : -len("/rollouts")]
        for key in logs
        if key.startswith(ENV_PREFIX) and key.endswith("/rollouts") and len(key) > len(ENV_PREFIX) + len("/rollouts")
    )
    figures = []
    for name in names:
        prefix = f"{ENV_PREFIX}{name}"
        components = {
            key[len(prefix) + len(_COMPONENTS) :]: float(value)
            for key, value in logs.items()
            if key.startswith(prefix + _COMPONENTS) and _finite(value)
        }
        reward = logs.get(f"{prefix}/reward")
        figures.append(
            EnvStep(
                name,
                float(reward) if _finite(reward) else None,
                components,
                **{count: int(_number(logs.get(f"{prefix}/{count}"))) for count in _COUNTS},
            )
        )
    return tuple(figures)


def without_env_keys(logs: Mapping[str, Any]) -> dict[str, Any]:
    """``logs`` less the flat per-env keys (the run store keeps them as records instead)."""
    return {key: value for key, value in logs.items() if not key.startswith(ENV_PREFIX)}


@dataclass(frozen=True, slots=True)
class EnvEval:
    """One env's part of a held-out eval: its pass rate and mean per component."""

    env: str
    rollouts: int
    scored: int
    passed: int
    means: Mapping[str, float] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.rollouts if self.rollouts else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "rollouts": self.rollouts,
            "scored": self.scored,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "means": dict(self.means),
        }


def eval_envs(
    outcomes: Iterable[RolloutOutcome], env_of: Mapping[str, str | None], threshold: float
) -> tuple[EnvEval, ...]:
    """Each env's eval figures from its rollouts (``env_of``: example id -> ``Example.env``).

    Components are zero-filled among the env's own rollouts only; a rollout passes
    when the sum of its components reaches ``threshold`` (the summary's rule)."""
    by_env: dict[str, list[RolloutOutcome]] = {}
    for outcome in outcomes:
        env = env_of.get(outcome.example_id)
        if env is not None:
            by_env.setdefault(env, []).append(outcome)
    figures = []
    for env in sorted(by_env):
        rows = by_env[env]
        fill = zero_fill([outcome.rewards for outcome in rows])
        scored = [reward for outcome, reward in zip(rows, fill.rewards, strict=True) if outcome.scored]
        figures.append(
            EnvEval(
                env,
                rollouts=len(rows),
                scored=len(scored),
                passed=sum(bool(reward) and sum(reward.values()) >= threshold for reward in fill.rewards),
                means={name: sum(reward.get(name, 0.0) for reward in scored) / len(scored) for name in fill.components}
                if scored
                else {},
            )
        )
    return tuple(figures)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float:
    return float(value) if _finite(value) else 0.0
