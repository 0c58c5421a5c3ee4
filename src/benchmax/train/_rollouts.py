"""TRL's ``rollout_func``: benchmax's engine produces every training rollout.

Each group of siblings is one ``Engine.run_group`` call, so multi-turn tools,
``rollout_context``, termination reasons, group rewards and log attribution
behave exactly as in ``eval``. Each rollout goes back to TRL as the turn-0
prompt ids plus one completion stream (every completion as generated,
tool-result tokens between them masked out by ``env_mask``), and every group is
written to the run store with the step that trains on it. A rollout with several
token sequences (an agent's sub-agent) goes to TRL as its first; the others are
kept in ``RolloutBatch.extra`` and join the loss as rows of their own, with the
rollout's advantage (:func:`benchmax.train._rows.add_sequence_rows`).

A training step's rollouts come from :meth:`RolloutBridge.step_batch`: the
bridge draws the examples, drops dead groups and refills the step (see
:mod:`benchmax.train._groups`), and with ``async_steps=K`` generates up to K
steps ahead of the trainer (see :class:`StepPipeline`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchmax.aio import LoopThread
from benchmax.engine import Engine, GroupResult
from benchmax.envs import (
    DatasetSplit,
    Example,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    TerminationReason,
)
from benchmax.runner import GroupKey, LocalExecutor, RolloutSlots, RunSession, failed_group
from benchmax.train._bridge_curriculum import _CurriculumSteps
from benchmax.train._curriculum import ExamplePool, Sampler
from benchmax.train._envs import EnvStep, step_envs
from benchmax.train._groups import ExampleSampler, is_dead, rollout_score, select_groups
from benchmax.train._pipeline import StepPipeline
from benchmax.train._rewards import FILLED_KEY, REWARDS_KEY, SCORABLE_KEY, component_reward, zero_fill
from benchmax.train._sequences import TokenCheck, TokenMismatch, TokenSequence, _masked, assemble_sequences
from benchmax.train._tokens import render_prompt

logger = logging.getLogger("benchmax.train")

@dataclass(frozen=True, slots=True)
class RolloutBatch:
    """What one ``rollout_func`` call trains on (kept as ``bridge.last`` for callers)."""

    step: int
    batch: int
    outcomes: tuple[RolloutOutcome, ...]
    sequences: tuple[TokenSequence, ...]
    rewards: tuple[dict[str, float], ...]
    filled: tuple[tuple[str, ...], ...]
    masked: tuple[bool, ...] = ()
    """Per rollout: a dead group filling a slot the refill could not, masked out of the loss."""
    drawn: tuple[RolloutOutcome, ...] = ()
    """Every rollout generated for the step, dropped dead groups included."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    checks: tuple[TokenCheck, ...] = ()
    envs: tuple[EnvStep, ...] = ()
    """Per env of a mixture: what the step generated for it (``()`` in a run of one env)."""
    extra: tuple[tuple[TokenSequence, ...], ...] = ()
    """Per rollout: its token sequences after the first (``sequences`` holds the first), trained
    as rows of their own with the rollout's advantage; empty for a one-sequence rollout."""


@dataclass(frozen=True, slots=True)
class _Group:
    example: Example
    key: GroupKey
    split: DatasetSplit
    rollout_ids: tuple[str, ...]


@dataclass
class RolloutBridge(_CurriculumSteps):
    """Callable as TRL's ``rollout_func(prompts, trainer)``.

    ``prompts`` are example ids (the training dataset's ``prompt` column); in
    training their count sets the step's number of groups and the bridge draws
    the examples itself. ``session`` is the run's
    :class:`benchmax.runner.RunSession` (every group is written through it) or
    ``None``. ``weights`` are the trained components' weights (dead-group test);
    ``before_step(trainer, step)`` runs at each training call before its
    rollouts are taken (the trainer syncs the generation weights there).
    """

    engine: Engine | LocalExecutor
    """Runs each group: the env's engine, or a mixture's executor (the group's own env's engine)."""
    examples: Mapping[str, Example]
    tokenizer: Any
    base_url: str
    model: str = "policy"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    session: RunSession | None = None
    loop: LoopThread | None = None
    policy: Any = None
    first_batch: int = 0
    example_index: Mapping[str, int] = field(default_factory=dict)
    last: RolloutBatch | None = None
    known_components: frozenset[str] | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    drop_unscorable: bool = False
    dead_groups: str = "drop"
    max_refill: int | None = None
    """Extra groups a step may draw to replace dead ones (default: 2 x the step's groups)."""
    async_steps: int = 0
    group_size: int | None = None
    """Siblings per training group: the run's ``TrainConfig.group_size``, from which TRL's
    ``num_generations`` is set (never read back from the trainer)."""
    concurrency: int | None = None
    """Rollouts in flight at once, the steps generated ahead included (``None``: a step's all at once)."""
    seed: int = 0
    before_step: Callable[[Any, int], None] | None = None
    history: dict[int, RolloutBatch] = field(default_factory=dict, repr=False)
    """Recent training batches by step (the trainer's callbacks read and drop them)."""
    _batch: int = field(default=-1, repr=False)
    _slots: RolloutSlots | None = field(default=None, repr=False)
    _pipeline: StepPipeline | None = field(default=None, repr=False)
    _sampler: ExampleSampler | None = field(default=None, repr=False)
    _live_rate: float = field(default=1.0, repr=False)
    curriculum: Sampler | None = None
    """Decides what each group runs (``None``: shuffled epochs of ``examples``); told every scored group."""
    pool: ExamplePool | None = None
    """What ``curriculum`` draws from (required with it)."""
    _curriculum_started: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self._batch = self.first_batch - 1
        select_groups([], 0, mode=self.dead_groups)  # validates the mode
        if self.async_steps < 0:
            raise ValueError(f"async_steps must be >= 0, got {self.async_steps}")
        if self.curriculum is not None and self.pool is None:
            raise ValueError("a curriculum needs the pool it draws from (RolloutBridge.pool)")

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        training = bool(getattr(trainer.model, "training", True))
        if not training:
            size = trainer.num_generations_eval
            output = self.generate(prompts, group_size=size, step=int(trainer.state.global_step), split="eval")
            self._adopt_components(trainer, output[REWARDS_KEY])
            return output
        if self.group_size is None:
            raise ValueError("RolloutBridge.group_size is not set: training needs the run's group size")
        size = self.group_size
        self._groups(prompts, size, 0, "train")  # validates TRL's batch: example ids, whole groups
        step = int(trainer.state.global_step)
        if self.before_step is not None:
            self.before_step(trainer, step)
        waited = time.perf_counter()
        batch = self.step_batch(
            step,
            groups=len(prompts) // size,
            group_size=size,
            last_step=int(getattr(trainer.args, "max_steps", 0) or 0) - 1,
        )
        metrics = dict(batch.metrics)
        metrics["time/rollout_wait"] = time.perf_counter() - waited
        self.history[step] = replace(batch, metrics=metrics)
        store = getattr(trainer, "_metrics", None)
        if isinstance(store, Mapping) and "train" in store:
            for name, value in metrics.items():
                store["train"][name].append(float(value))
        self._adopt_components(trainer, batch.rewards)
        return self._output(batch)

    # -- training steps ------------------------------------------------------

    def step_batch(self, step: int, *, groups: int, group_size: int, last_step: int | None = None) -> RolloutBatch:
        """The rollouts training step ``step`` trains on (``groups`` groups of ``group_size``).

        Synchronous (``async_steps=0``): generated now, from the weights as they
        are. Async: taken from the pipeline, which generated it while earlier
        steps trained, from weights at most ``async_steps`` steps older.
        """
        if self.loop is None:
            self.loop = LoopThread(name="benchmax-train-loop")
        if self._pipeline is None:
            self._pipeline = StepPipeline(self, groups, group_size, first_step=step, last_step=last_step)
        batch = self.loop.run(self._pipeline.take(step))
        self.last = batch
        return batch

    async def aclose_pipeline(self) -> None:
        """Stop generating ahead (the run ended); a step in progress is abandoned."""
        if self._pipeline is not None:
            await self._pipeline.aclose()

    def sampler(self) -> ExampleSampler:
        if self._sampler is None:
            self._sampler = ExampleSampler(list(self.examples), seed=self.seed)
        return self._sampler

    async def make_step(self, step: int, groups: int, group_size: int) -> RolloutBatch:
        """Generate one training step: draw, run, drop dead groups, refill, store."""
        started = time.perf_counter()
        self._batch += 1
        batch = self._batch
        budget = groups + (self.max_refill if self.max_refill is not None else 2 * groups)
        if self.dead_groups == "keep":
            budget = groups
        weights = self._score_weights()
        drawn: list[_Group] = []
        results: list[GroupResult] = []
        dead: list[bool] = []
        seen: dict[str, int] = {}
        while len(drawn) < budget:
            missing = groups - dead.count(False) if self.dead_groups == "drop" else groups
            # draw enough for the live groups still missing at the live rate seen so far
            # (at most twice as many), so a refill rarely needs a third wave
            wave = min(math.ceil(missing / max(self._live_rate, 0.5)), budget - len(drawn))
            if missing <= 0 or wave <= 0:
                break
            wave_groups = []
            for _ in range(wave):
                example = self._draw(step)
                occurrence = seen.get(example.id, 0)
                seen[example.id] = occurrence + 1
                key = GroupKey.of(
                    "train", example, self.example_index.get(example.id, 0), step=step, occurrence=occurrence
                )
                wave_groups.append(
                    _Group(example, key, "train", tuple(key.rollout_id(sample) for sample in range(group_size)))
                )
            wave_results = await self._run_groups(wave_groups)
            drawn += wave_groups
            results += wave_results
            verdicts = [
                is_dead(result.outcomes, weights, drop_unscorable=self.drop_unscorable) for result in wave_results
            ]
            dead += verdicts
            if self.curriculum is not None:
                for group, result, verdict in zip(wave_groups, wave_results, verdicts, strict=True):
                    self._observe(group.example, result, verdict, weights, step)
            self._live_rate = 0.8 * self._live_rate + 0.2 * verdicts.count(False) / len(verdicts)
            if self.dead_groups == "keep":
                break
        if self.session is not None:
            if self.pool is not None:
                await self._store_new_examples()
            await asyncio.to_thread(self._store, drawn, results, batch)
        all_outcomes = [outcome for result in results for outcome in result.outcomes]
        if self.policy is not None:
            self.policy.release([outcome.rollout_id for outcome in all_outcomes])
        selection = select_groups(dead, groups, mode=self.dead_groups)
        chosen = [(drawn[index], results[index], index in selection.masked) for index in selection.trained]
        outcomes = [outcome for _, result, _ in chosen for outcome in result.outcomes]
        examples = [group.example for group, result, _ in chosen for _ in result.outcomes]
        masked = [flag for _, result, flag in chosen for _ in result.outcomes]
        fill = zero_fill([outcome.rewards for outcome in outcomes], [example.env for example in examples])
        checks = []
        sequences = []
        for outcome, example, hidden in zip(outcomes, examples, masked, strict=True):
            built, check = self._sequence(outcome, example)
            checks.append(check)
            sequences.append(tuple(_masked(sequence) for sequence in built) if hidden else built)
        envs = step_envs(
            [
                (group.example.env, result.outcomes, flag)
                for group, result, flag in zip(drawn, results, dead, strict=True)
            ],
            weights,
        )
        metrics = self._step_metrics(step, groups, drawn, results, dead, selection.masked, checks, weights)
        for figures in envs:
            metrics.update(figures.logs())
        if self.curriculum is not None:
            metrics.update(await self._curriculum_step(step))
        metrics["time/generate"] = time.perf_counter() - started
        failed = sum(not outcome.scored for outcome in all_outcomes)
        if failed:
            logger.warning("step %d: %d of %d rollouts failed operationally", step, failed, len(all_outcomes))
        return RolloutBatch(
            step,
            batch,
            tuple(outcomes),
            tuple(built[0] for built in sequences),
            fill.rewards,
            fill.filled,
            masked=tuple(masked),
            drawn=tuple(all_outcomes),
            metrics=metrics,
            checks=tuple(checks),
            envs=envs,
            extra=tuple(built[1:] for built in sequences),
        )

    def _score_weights(self) -> dict[str, float]:
        names = set(self.known_components or ()) | set(self.weights)
        return {name: float(self.weights.get(name, 1.0)) for name in sorted(names)}

    def _step_metrics(
        self,
        step: int,
        groups: int,
        drawn: Sequence[_Group],
        results: Sequence[GroupResult],
        dead: Sequence[bool],
        masked: Sequence[int],
        checks: Sequence[TokenCheck],
        weights: Mapping[str, float],
    ) -> dict[str, float]:
        """Figures of everything the step generated (dropped groups included): how the
        policy did, not only the part trained on."""
        outcomes = [outcome for result in results for outcome in result.outcomes]
        fill = zero_fill(
            [outcome.rewards for outcome in outcomes],
            [group.example.env for group, result in zip(drawn, results, strict=True) for _ in result.outcomes],
        )
        metrics: dict[str, float] = {
            "groups/drawn": float(len(drawn)),
            "groups/dead": float(sum(dead)),
            "groups/dead_share": sum(dead) / len(dead) if dead else 0.0,
            "groups/dead_trained": float(len(masked)),
            "groups/live_unused": float(max(0, dead.count(False) - groups)) if self.dead_groups == "drop" else 0.0,
            "rollouts/generated": float(len(outcomes)),
            "rollouts/failed": float(sum(not outcome.scored for outcome in outcomes)),
            "tokens/mismatch": float(sum(check.status == "mismatch" for check in checks)),
        }
        if outcomes:
            metrics["generated/reward"] = sum(rollout_score(outcome, weights) for outcome in outcomes) / len(
                outcomes
            )
        for name in fill.components:
            # over the rollouts that have the component: in a mixture, those of the envs that emit it
            values = [reward[name] for reward in fill.rewards if name in reward]
            metrics[f"generated/{name}"] = sum(values) / len(values)
        turn_sums: dict[str, list[float]] = {}
        for outcome in outcomes:  # the env's per-turn rewards (env_response), per turn that gave one
            for turn in outcome.turns:
                for name, value in (turn.rewards or {}).items():
                    turn_sums.setdefault(name, []).append(float(value))
        for name, values in sorted(turn_sums.items()):
            metrics[f"turn_rewards/{name}"] = sum(values) / len(values)
        if turn_sums and outcomes:
            metrics["turns/mean"] = sum(len(outcome.turns) for outcome in outcomes) / len(outcomes)
        versions = [
            turn.policy_version for outcome in outcomes for turn in outcome.turns if turn.policy_version is not None
        ]
        if versions:
            metrics["policy/staleness_max"] = float(step - min(versions))
            metrics["policy/staleness_mean"] = step - sum(versions) / len(versions)
        return metrics

    def _output(self, batch: RolloutBatch) -> dict[str, list[Any]]:
        sequences, outcomes = batch.sequences, batch.outcomes
        return {
            "prompt_ids": [list(seq.prompt_ids) for seq in sequences],
            "completion_ids": [list(seq.completion_ids) for seq in sequences],
            "logprobs": [list(seq.logprobs) for seq in sequences],
            "env_mask": [list(seq.env_mask) for seq in sequences],
            REWARDS_KEY: list(batch.rewards),
            FILLED_KEY: [list(names) for names in batch.filled],
            SCORABLE_KEY: [outcome.scored for outcome in outcomes],
            "termination_reason": [outcome.termination_reason for outcome in outcomes],
            "rollout_id": [outcome.rollout_id for outcome in outcomes],
            "example_id": [outcome.example_id for outcome in outcomes],
        }

    # -- a given batch of prompts ---------------------------------------------

    def generate(
        self, prompts: Sequence[Any], *, group_size: int, step: int, split: DatasetSplit = "train"
    ) -> dict[str, list[Any]]:
        """Run exactly ``prompts`` (runs of ``group_size`` siblings) now and return TRL's
        ``prompt_ids``/``completion_ids``/``logprobs``/``env_mask`` plus the reward keys
        the component reward functions read. No dead-group drop, no pipeline."""
        groups = self._groups(prompts, group_size, step, split)
        self._batch += 1
        batch = self._batch
        if self.loop is None:
            self.loop = LoopThread(name="benchmax-train-loop")
        results = self.loop.run(self._run_groups(groups))
        pairs = [
            (outcome, group.example)
            for group, result in zip(groups, results, strict=True)
            for outcome in result.outcomes
        ]
        outcomes = [outcome for outcome, _ in pairs]
        if self.session is not None:
            self._store(groups, results, batch)
        if self.policy is not None:
            self.policy.release([outcome.rollout_id for outcome in outcomes])
        fill = zero_fill([outcome.rewards for outcome in outcomes], [example.env for _, example in pairs])
        built = [self._sequence(outcome, example) for outcome, example in pairs]
        self.last = RolloutBatch(
            step,
            batch,
            tuple(outcomes),
            tuple(sequences[0] for sequences, _ in built),
            fill.rewards,
            fill.filled,
            masked=(False,) * len(outcomes),
            drawn=tuple(outcomes),
            checks=tuple(check for _, check in built),
            extra=tuple(sequences[1:] for sequences, _ in built),
        )
        failed = sum(not outcome.scored for outcome in outcomes)
        if failed:
            logger.warning("step %d: %d of %d rollouts failed operationally", step, failed, len(outcomes))
        return self._output(self.last)

    def _groups(self, prompts: Sequence[Any], size: int, step: int, split: DatasetSplit) -> list[_Group]:
        """One group per run of siblings; a key per group (a repeat of an example in the batch is told apart)."""
        if size < 1 or len(prompts) % size:
            raise ValueError(f"{len(prompts)} prompts do not split into groups of {size}")
        groups = []
        seen: dict[str, int] = {}
        for start in range(0, len(prompts), size):
            chunk = [self._example_id(prompt) for prompt in prompts[start : start + size]]
            if len(set(chunk)) != 1:
                raise ValueError(f"prompts {start}..{start + size - 1} are not one example's siblings: {chunk}")
            example = self.examples[chunk[0]]
            occurrence = seen.get(example.id, 0)
            seen[example.id] = occurrence + 1
            index = self.example_index.get(example.id, 0)
            key = GroupKey.of(split, example, index, step=step, occurrence=occurrence)
            groups.append(_Group(example, key, split, tuple(key.rollout_id(sample) for sample in range(size))))
        return groups

    def _example_id(self, prompt: Any) -> str:
        if isinstance(prompt, str) and prompt in self.examples:
            return prompt
        raise ValueError(
            f"rollout_func got prompt {str(prompt)[:80]!r}, which is no example id of this run; "
            "the training dataset's 'prompt' column must hold benchmax example ids"
        )

    async def _run_groups(self, groups: Sequence[_Group]) -> list[GroupResult]:
        return list(
            await asyncio.gather(*(self._run_group(group.example, group.rollout_ids, group.split) for group in groups))
        )

    async def _run_group(
        self, example: Example, rollout_ids: Sequence[str], split: DatasetSplit = "train"
    ) -> GroupResult:
        requests = [
            RolloutRequest(
                rollout_id=rollout_id,
                example=example,
                model=self.model,
                base_url=self.base_url,
                split=split,
                sampling=self.sampling,
            )
            for rollout_id in rollout_ids
        ]
        if self._slots is None and self.concurrency is not None:
            self._slots = RolloutSlots(self.concurrency)
        started = time.time()
        try:
            if self._slots is None:
                return await self.engine.run_group(requests)
            async with self._slots.hold(len(requests)):
                return await self.engine.run_group(requests)
        except Exception as exc:
            logger.exception("rollout group for example %s failed", example.id)
            return failed_group(
                requests,
                TerminationReason.HARNESS_ERROR,
                f"run_group raised {type(exc).__name__}: {exc}",
                started_at=started,
            )

    # -- tokens ----------------------------------------------------------------

    def _sequence(
        self, outcome: RolloutOutcome, example: Example
    ) -> tuple[tuple[TokenSequence, ...], TokenCheck]:
        """The rollout's token sequences (one per ``TurnRecord.sequence``) and its token check;
        a rollout any of whose sequences fails the check (or has no tokens) trains on
        nothing: one masked end token."""
        try:
            return assemble_sequences(outcome), TokenCheck(outcome.rollout_id, "ok")
        except TokenMismatch as exc:
            logger.error("rollout %s: %s; masked out of the loss", outcome.rollout_id, exc)
            check = TokenCheck(outcome.rollout_id, "mismatch", str(exc))
        except ValueError as exc:
            check = TokenCheck(outcome.rollout_id, "no_tokens", str(exc))
        return (self._empty(example),), check

    def _empty(self, example: Example) -> TokenSequence:
        """A rollout with no usable tokens: its prompt and one masked end token."""
        try:
            prompt = render_prompt(self.tokenizer, example.payload["prompt_messages"], None)
        except Exception:
            prompt = []
        eos = self.tokenizer.eos_token_id
        prompt = prompt or [eos]
        return TokenSequence(tuple(prompt), (eos,), (0,), (0.0,))

    # -- store and warnings ----------------------------------------------------

    def _store(self, groups: Sequence[_Group], results: Sequence[GroupResult], batch: int) -> None:
        assert self.session is not None
        for group, result in zip(groups, results, strict=True):
            outcomes = result.outcomes
            self.session.write_group(
                group.key,
                result,
                batch=batch,
                started_at=min(outcome.started_at for outcome in outcomes),
                ended_at=max(outcome.ended_at for outcome in outcomes),
            )
        try:
            self.session.close_batch(batch)
        except Exception:
            logger.exception("writing batch %d's rollouts to the run store failed", batch)

    def _adopt_components(self, trainer: Any, rewards: Sequence[Mapping[str, float]]) -> None:
        """Train on a component first emitted after training started, from this step on.

        The probe group before training sees what one example's rollouts happen to
        emit; a conditional component (``exact`` only for one-word replies) may first
        appear at any step. It joins TRL's reward functions here, in the trainer's
        thread before TRL scores the batch, with its ``--weight`` or 1.0 like the
        probe's components: what is trained on must not depend on one probe's luck.
        The lists extended are those TRL itself extends for environment rewards.
        """
        if self.known_components is None:
            return
        new = sorted({name for reward in rewards for name in reward} - self.known_components)
        for name in new:
            self.known_components = self.known_components | {name}
            weight = float(self.weights.get(name, 1.0))
            if hasattr(trainer, "reward_func_names"):
                trainer.reward_funcs.append(component_reward(name, drop_unscorable=self.drop_unscorable))
                trainer.reward_func_names.append(name)
                trainer.reward_processing_classes.append(None)
                trainer.reward_weights = trainer.reward_weights.new_tensor([*trainer.reward_weights.tolist(), weight])
            logger.info(
                "new reward component %r at step %d (no probe rollout emitted it): trained on from this "
                "step, weight %g",
                name,
                int(trainer.state.global_step) + 1,  # numbered as the terminal numbers the update it feeds
                weight,
            )
