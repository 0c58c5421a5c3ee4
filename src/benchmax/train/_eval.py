"""Evaluating a policy (the base model, a checkpoint, the model being trained) like any model.

A trained checkpoint is only worth what ``benchmax eval`` says of it, so it is
evaluated through the runner's own ``arun``: same engine, same run store, same
summary as an HTTP model. The policy is an :class:`InProcessPolicy` registered
as the model client of :data:`POLICY_URL` in a pool of its own, so training and
evaluation render prompts, parse tool calls and sample exactly alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmax.aio import LoopThread
from benchmax.client import ClientPool
from benchmax.engine import GroupResult
from benchmax.envs import DatasetSplit, Environment, RolloutOutcome, SamplingParams
from benchmax.loading import open_examples
from benchmax.mix import MixSpec
from benchmax.runner import RunConfig, RunResult, arun
from benchmax.train._envs import EnvEval, eval_envs
from benchmax.train._policy import InProcessPolicy

POLICY_URL = "inprocess://policy"
"""The base URL an in-process policy is registered under."""


@dataclass(frozen=True, slots=True)
class EvalSummary:
    """One eval run of a policy: where it is stored and its mean per component.

    ``envs`` holds, in a mixture, each env's pass rate and components (``()`` for one env)."""

    run_dir: Path
    rollouts: int
    means: Mapping[str, float]
    reasons: Mapping[str, int]
    envs: tuple[EnvEval, ...] = field(default=())

    @classmethod
    def of(
        cls,
        result: RunResult,
        env_of: Mapping[str, str | None] | None = None,
        outcomes: Iterable[RolloutOutcome] = (),
    ) -> EvalSummary:
        """The summary of ``result``; with ``env_of`` (example id -> ``Example.env``) and the
        run's ``outcomes``, its per-env figures too."""
        stats = result.stats
        envs: tuple[EnvEval, ...] = ()
        if env_of and any(env is not None for env in env_of.values()):
            envs = eval_envs(outcomes, env_of, stats.pass_threshold)
        return cls(
            result.run_dir,
            stats.rollouts,
            {name: component.mean for name, component in sorted(stats.components.items())},
            dict(stats.reasons),
            envs,
        )

    def to_json(self) -> dict[str, object]:
        """What the training run's meta keeps of this eval (``envs`` only in a mixture)."""
        stored: dict[str, object] = {"means": dict(self.means), "rollouts": self.rollouts}
        if self.envs:
            stored["envs"] = {figures.env: figures.to_json() for figures in self.envs}
        return stored

    def line(self) -> str:
        parts = ", ".join(f"{name} {mean:.3f}" for name, mean in self.means.items()) or "no rewards"
        return f"{parts} ({self.rollouts} rollouts)"


def eval_policy(
    env: str | Environment[Any, Any],
    model: Any,
    tokenizer: Any,
    *,
    run_dir: Path,
    split: DatasetSplit = "eval",
    group_size: int = 8,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 64,
    max_examples: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    data_dir: Path | None = None,
    name: str = "policy",
    loop: LoopThread | None = None,
    batch_window: float = 0.005,
    mix: MixSpec | None = None,
) -> EvalSummary:
    """Evaluate ``model`` (a transformers model, its weights as they are now) on ``split``.

    ``env`` is a spec string (loaded by the runner) or an env instance (the
    caller owns it). Every rollout lands in ``run_dir``'s store as an ``eval`` run.
    ``mix`` is the mixture ``env`` is (an :class:`~benchmax.mix.EnvMix`), as the eval
    run's config records it; the runner runs each group on its own env's engine.
    """
    policy = InProcessPolicy(model, tokenizer, default_max_tokens=max_tokens, batch_window=batch_window)
    clients = ClientPool()
    clients.register(POLICY_URL, policy)
    if mix is not None:
        spec = "+".join(member.name for member in mix.members)
    else:
        spec = env if isinstance(env, str) else f"{type(env).__module__}:{type(env).__qualname__}"
    config = RunConfig(
        env=spec,
        env_kwargs=dict(env_kwargs or {}),
        data_dir=data_dir,
        split=split,
        max_examples=max_examples,
        group_size=group_size,
        concurrency=max(group_size, 256),
        model=name,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        run_dir=Path(run_dir),
        mix=mix,
    )
    instance = None if isinstance(env, str) else env
    own_loop = loop is None
    runner = loop or LoopThread(name="benchmax-train-loop")
    try:
        seen = _Outcomes()
        result = runner.run(arun(config, env=instance, clients=clients, observer=seen))
        env_of = None
        if instance is not None:
            # which env each example belongs to, in a mixture (the store keys rollouts by example id)
            places = [Path(data_dir)] if data_dir is not None else [Path.cwd()]
            stream = runner.run(open_examples(instance, split, places, max_examples=max_examples))
            env_of = {example.id: example.env for example in stream}
    finally:
        if own_loop:
            runner.close()
        policy.close()
    return EvalSummary.of(result, env_of, seen.outcomes)


class _Outcomes:
    """A run observer that keeps every rollout of the eval (a mixture's per-env figures read them)."""

    def __init__(self) -> None:
        self.outcomes: list[RolloutOutcome] = []

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None:
        pass

    def on_group(self, result: GroupResult, *, env: str | None = None) -> None:
        # the figures need rewards and status only: transcripts are not held for the whole eval
        self.outcomes.extend(replace(outcome, messages=[], turns=(), logs=()) for outcome in result.outcomes)
