"""``benchmax train``: GRPO through TRL on any benchmax environment.

TRL owns the optimisation (advantages, clipping, checkpoints); benchmax owns the
rollouts. Every step samples from the model being trained: by default the
policy model serves the engine in-process; with ``vllm="server"`` or
``"colocate"`` TRL's vLLM generates (TRL pushes the new weights to it before
each step) through :mod:`benchmax.train.vllm`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from benchmax.aio import LoopThread
from benchmax.engine import Engine, EngineConfig, GroupResult
from benchmax.envs import BaseEnv, Environment, Example, SamplingParams, has_levels, is_endless
from benchmax.loading import EnvSpec, open_examples
from benchmax.mix import EnvMix
from benchmax.runner import LocalExecutor, RunMeta, RunOrigin, RunSession, default_run_dir
from benchmax.telemetry import TelemetrySession, start_telemetry, stop_telemetry
from benchmax.train import _model as model_loading
from benchmax.train._config import TrainConfig, TrainError, TrainResult, _auto_async_steps
from benchmax.train._curriculum import ExamplePool, Sampler
from benchmax.train._env_loading import _train_env
from benchmax.train._eval import POLICY_URL, EvalSummary, eval_policy
from benchmax.train._plot import component_curves, env_curves
from benchmax.train._policy import InProcessPolicy, TokenPolicy
from benchmax.train._progress import CURVES, StepCallback, write_logs
from benchmax.train._report import StepReport
from benchmax.train._rollouts import RolloutBridge
from benchmax.train._samplers import Uniform, parse_curriculum
from benchmax.train._trl import CHECKPOINTS, freeze_below, grpo_trainer, loadable_by_vllm
from benchmax.train._vllm import vllm_policy

logger = logging.getLogger("benchmax.train")


@dataclass
class TrainingSession:
    """A built but not yet started run: the trainer plus what it drives; ``close()`` releases them all."""

    trainer: Any
    bridge: RolloutBridge
    policy: TokenPolicy
    """The policy that generates training rollouts (in-process, or vLLM's)."""
    engine: Engine | LocalExecutor
    """Runs the groups: the env's engine, or for a mixture the runner's executor (an engine per member)."""
    env: Environment[Any, Any]
    run_session: RunSession | None
    """The run the rollouts are written to (through it only)."""
    loop: LoopThread
    config: TrainConfig
    run_dir: Path
    components: tuple[str, ...]
    owns_env: bool = True
    probe_policy: TokenPolicy | None = None
    """The in-process policy that ran the probe group, when vLLM generates the rest."""
    tokenizer: Any = None
    base_dir: Path | None = None
    reporter: Callable[[StepReport], None] | None = None
    """Called with each step's report (the CLI prints a line); ``None``: logged at INFO."""
    envs: tuple[str, ...] = ()
    """The envs of a mixture (each example's ``Example.env``), in name order; ``()`` for one env."""
    telemetry: TelemetrySession | None = None
    """The exporter of the rollouts' traces, flushed at close (``None``: not traced)."""

    def close(self) -> None:
        try:
            self.loop.run(self.bridge.aclose_pipeline())
            self.loop.run(self.engine.aclose())
            if self.probe_policy is not None:
                self.loop.run(self.probe_policy.aclose())
            if self.owns_env:
                self.loop.run(self.env.aclose())
        finally:
            self.loop.close()
            self.policy.close()
            if self.probe_policy is not None:
                self.probe_policy.close()
            if self.run_session is not None:
                self.run_session.abandon()
            stop_telemetry(self.telemetry)


def train(
    env: str | BaseEnv | EnvMix = "",
    *,
    config: TrainConfig | None = None,
    reporter: Callable[[StepReport], None] | None = None,
    sampler: Sampler | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train a policy with GRPO on ``env`` (a spec string, an env instance or an :class:`EnvMix`;
    or, with ``env`` empty, the mixture ``config.mix`` names).

    ``train("examples/format", model="embedded", max_steps=40)`` writes the run
    store, checkpoints, ``metrics.jsonl``, ``reward_curve.png`` and ``curves/``
    into the run dir. ``reporter`` receives each step's :class:`StepReport`. ``sampler``
    (a :class:`Sampler` of your own) decides what each group runs, in place of
    ``config.curriculum``.
    """
    session = build(env, config=config, reporter=reporter, sampler=sampler, **overrides)
    try:
        return run(session)
    finally:
        session.close()


def run(session: TrainingSession) -> TrainResult:
    checkpoints = session.run_dir / CHECKPOINTS
    resume = session.config.resume and any(checkpoints.glob("checkpoint-*"))
    reporter = StepCallback(session)
    session.trainer.add_callback(reporter)
    before = after = None
    if session.run_session is None:
        before = _evaluate(session)
        seconds = _train(session, resume)
        after = _evaluate(session)
    else:
        with session.run_session.lifecycle() as stored:
            before = _evaluate(session)
            seconds = _train(session, resume)
            after = _evaluate(session)
            stored.update_meta(
                steps=session.trainer.state.global_step,
                train_seconds=seconds,
                evals={
                    summary.run_dir.name: {"step": step, **summary.to_json()}
                    for step, summary in ((0, before), (session.trainer.state.global_step, after))
                    if summary is not None
                },
            )
    history = tuple(session.trainer.state.log_history)
    title = f"{session.config.env} · {session.config.model}"
    curve = write_logs(session.run_dir, history, title=title)
    curves = tuple(component_curves(history, session.run_dir / CURVES, title=title))
    curves += tuple(env_curves(history, session.run_dir / CURVES, title=title))
    return TrainResult(
        run_dir=session.run_dir,
        steps=int(session.trainer.state.global_step),
        log_history=history,
        components=tuple(session.trainer.reward_func_names),  # the probe's, then any adopted mid-run
        curve=curve,
        curves=curves,
        eval_before=before,
        eval_after=after,
        train_seconds=seconds,
    )


def _train(session: TrainingSession, resume: bool) -> float:
    """The training loop alone (no load, no eval); generation ahead of it stops with it."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # TRL reads transformers' deprecated alias at every logprob pass; nothing the user can act on
            warnings.filterwarnings("ignore", r"`is_gradient_checkpointing` is deprecated", FutureWarning)
            session.trainer.train(resume_from_checkpoint=True if resume else None)
    finally:
        session.loop.run(session.bridge.aclose_pipeline())
    return time.perf_counter() - started


def _evaluate(session: TrainingSession) -> EvalSummary | None:
    """The held-out split through the runner's eval path, with the trainer's weights as they are now."""
    config = session.config
    if not config.eval_group_size:
        return None
    step = int(session.trainer.state.global_step)
    run_dir = session.run_dir / f"eval-step{step}"
    if (run_dir / "run.sqlite").exists():
        logger.info("%s exists already (a resumed run); not evaluated again", run_dir)
        return None
    started = time.perf_counter()
    summary = eval_policy(
        session.env,
        session.trainer.model,
        session.tokenizer,
        run_dir=run_dir,
        split="eval",
        group_size=config.eval_group_size,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        max_examples=config.eval_examples,
        data_dir=session.base_dir if config.mix is None else None,
        mix=config.mix,
        name=config.model,
        loop=session.loop,
        batch_window=config.batch_window,
    )
    logger.info("eval at step %d: %s (%.0fs)", step, summary.line(), time.perf_counter() - started)
    return summary


def build(
    env: str | BaseEnv | EnvMix = "",
    *,
    config: TrainConfig | None = None,
    reporter: Callable[[StepReport], None] | None = None,
    sampler: Sampler | None = None,
    **overrides: Any,
) -> TrainingSession:
    """Load everything and construct TRL's ``GRPOTrainer`` without starting it.

    ``reporter`` receives each step's :class:`StepReport` (the CLI prints one line);
    ``sampler`` replaces ``config.curriculum`` (its ``describe()`` is recorded instead).
    """
    from dataclasses import replace

    config = replace(config or TrainConfig(), **overrides)
    config, sampler = _curriculum(config, sampler)
    env_obj, owns_env, mix, spec_name, places, config = _train_env(env, config)
    config = _settled(replace(config, env=spec_name))
    run_dir = _run_dir(config)
    loop = LoopThread(name="benchmax-train-loop")
    run_session = None
    policy = None
    telemetry = start_telemetry(config.telemetry)  # the probe group's rollouts are traced too
    try:
        stream = loop.run(open_examples(env_obj, "train", places, max_examples=config.max_examples, endless=True))
        base_dir = stream.base_dir or places[0]
        endless = is_endless(stream.dataset) and config.max_examples is None
        # an endless dataset: its first examples stand for it (TRL's prompt list, the probe); the
        # curriculum draws the rest as it needs them
        dataset = list(itertools.islice(stream, max(config.prompts_per_step, 2))) if endless else list(stream)
        if not dataset:
            raise TrainError(f"{spec_name}: create_dataset('train') returned no examples")
        examples = {example.id: example for example in dataset}
        if endless and sampler is None:
            sampler = Uniform(seed=config.seed)
        pool = None
        if sampler is not None:
            pool = loop.run(_pool(sampler, env_obj, mix, dataset, stream if endless else None, base_dir))
            sampler.start(pool)  # refused here (a level that does not exist...) before the model loads
        model, tokenizer = model_loading.load(config.model)
        if config.train_layers is not None:
            freeze_below(model, config.train_layers)
        policy = InProcessPolicy(
            model, tokenizer, default_max_tokens=config.max_tokens, batch_window=config.batch_window
        )
        engine = _engine(env_obj, mix, config, loop)
        engine.clients.register(POLICY_URL, policy)
        sampling = SamplingParams(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens)
        origin = RunOrigin(
            env=env_obj,
            spec=EnvSpec(spec_name, config.env_kwargs) if owns_env and mix is None else None,
            dataset=stream.dataset,
            model=config.model,
            endpoint=_policy_endpoint(config),
            sampling=sampling,
        )
        run_session, first_batch = _run_session(run_dir, config, dataset, origin)
        bridge = _bridge(
            config, engine, dataset, examples, tokenizer, sampling, run_session, loop, policy, first_batch,
            sampler, pool,
        )
        components = _components(config, bridge, dataset)
        bridge.known_components = frozenset(components)
        if config.vllm == "colocate":
            loadable_by_vllm(model, tokenizer, run_dir)
        trainer = grpo_trainer(config, model, tokenizer, bridge, components, examples, run_dir)
        policy, probe_policy = _generation_policy(config, trainer, model, tokenizer, policy, engine, bridge, loop)
    except BaseException as exc:
        if owns_env:
            _close_quietly(loop, env_obj)
        loop.close()
        if policy is not None:
            policy.close()
        if run_session is not None:
            run_session.abandon(exc)
        stop_telemetry(telemetry)
        raise
    return TrainingSession(
        trainer,
        bridge,
        policy,
        engine,
        env_obj,
        run_session,
        loop,
        config,
        run_dir,
        components,
        owns_env,
        probe_policy=probe_policy,
        tokenizer=tokenizer,
        base_dir=base_dir,
        reporter=reporter,
        envs=tuple(sorted({example.env for example in dataset if example.env is not None})),
        telemetry=telemetry,
    )


def _settled(config: TrainConfig) -> TrainConfig:
    """The config with ``async_steps`` chosen when left to benchmax, and torch's threads set as asked."""
    from dataclasses import replace

    if config.async_steps is None:
        steps, why = _auto_async_steps(config)
        config = replace(config, async_steps=steps)
        logger.info("async_steps=%d by default: %s (--async-steps K to choose)", steps, why)
    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    return config


def _engine(env: BaseEnv | EnvMix, mix: EnvMix | None, config: TrainConfig, loop: LoopThread) -> Engine | LocalExecutor:
    """What runs each group: the env's engine, or for a mixture the runner's mixture executor (one
    engine per member on one client pool, each group routed to its example's env; every member's
    tools are checked before the probe)."""
    if mix is None:
        return Engine(env, EngineConfig(telemetry=config.telemetry))
    engine = LocalExecutor(mix, EngineConfig(telemetry=config.telemetry))
    loop.run(engine.start())
    return engine


def _bridge(
    config: TrainConfig,
    engine: Engine | LocalExecutor,
    dataset: list[Any],
    examples: dict[str, Any],
    tokenizer: Any,
    sampling: SamplingParams,
    run_session: Any,
    loop: LoopThread,
    policy: InProcessPolicy,
    first_batch: int,
    sampler: Sampler | None,
    pool: ExamplePool | None,
) -> RolloutBridge:
    """The bridge between TRL's steps and the engine's groups, set up as the config asks (``sampler``:
    the curriculum that picks each group's example from ``pool``)."""
    return RolloutBridge(
        engine=engine,
        examples=examples,
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        model=config.model,
        sampling=sampling,
        session=run_session,
        loop=loop,
        policy=policy,
        first_batch=first_batch,
        example_index={example.id: index for index, example in enumerate(dataset)},
        weights=dict(config.weights),
        drop_unscorable=config.drop_unscorable,
        dead_groups=config.dead_groups,
        max_refill=config.max_refill,
        async_steps=config.async_steps,
        group_size=config.group_size,
        concurrency=config.concurrency,
        seed=config.seed + first_batch,
        curriculum=sampler,
        pool=pool,
    )


def _curriculum(config: TrainConfig, sampler: Sampler | None) -> tuple[TrainConfig, Sampler | None]:
    """The run's curriculum: the ``sampler`` given (recorded in the config by its description), or the
    one ``config.curriculum`` names (``None``: the plain seeded epochs)."""
    from dataclasses import replace

    if sampler is not None:
        if not isinstance(sampler, Sampler):
            raise TrainError(f"sampler must be a benchmax.train.Sampler, got {type(sampler).__name__}")
        return replace(config, curriculum=sampler.describe()), sampler
    if config.curriculum is not None:
        return config, parse_curriculum(config.curriculum, seed=config.seed)
    return config, None


def _generation_policy(
    config: TrainConfig,
    trainer: Any,
    model: Any,
    tokenizer: Any,
    policy: InProcessPolicy,
    engine: Engine | LocalExecutor,
    bridge: RolloutBridge,
    loop: LoopThread,
) -> tuple[TokenPolicy, TokenPolicy | None]:
    """The policy that generates the rollouts (TRL's vLLM, a copy of the model one step ahead, or the
    model itself), registered for the engine and the bridge; and the in-process one vLLM replaced."""
    probe_policy = None
    if config.vllm is not None:
        probe_policy, policy = policy, vllm_policy(
            trainer,
            tokenizer,
            default_max_tokens=config.max_tokens,
            batch_window=config.batch_window,
            extra=config.vllm_sampling,
        )
        engine.clients.register(POLICY_URL, policy)
        bridge.policy = policy
        bridge.before_step = _vllm_sync(trainer, policy, asynchronous=config.async_steps > 0)
    elif config.async_steps:
        # generation runs from a copy of its own while the trainer updates the model
        generator = copy.deepcopy(model)
        generator.requires_grad_(False)
        loop.run(policy.aclose())
        policy.close()
        policy = InProcessPolicy(
            generator, tokenizer, default_max_tokens=config.max_tokens, batch_window=config.batch_window
        )
        engine.clients.register(POLICY_URL, policy)
        bridge.policy = policy
        bridge.before_step = partial(_stage, policy)
    else:
        bridge.before_step = partial(_set_version, policy)
    return policy, probe_policy


async def _pool(
    sampler: Sampler,
    env: Environment[Any, Any],
    mix: EnvMix | None,
    dataset: Sequence[Example],
    endless: Any,
    base_dir: Path,
) -> ExamplePool:
    """What the curriculum draws from; the envs' difficulty levels are loaded when it uses them."""
    levels: dict[str | None, tuple[str, ...]] = {}
    level_datasets: dict[tuple[str | None, str], Any] = {}
    if sampler.uses_levels:
        envs: list[tuple[str | None, Any, Path]] = (
            [(member.name, member.env, member.places(base_dir)[0]) for member in mix.members]
            if mix is not None
            else [(None, env, base_dir)]
        )
        for name, member_env, directory in envs:
            if not has_levels(member_env):
                continue
            names = tuple(str(level) for level in member_env.difficulty_levels())
            if not names:
                continue
            levels[name] = names
            for level in names:
                level_datasets[(name, level)] = await member_env.create_level_dataset(level, "train", directory)
    return ExamplePool(
        dataset,
        endless={None: endless} if endless is not None else None,
        levels=levels,
        level_datasets=level_datasets,
        weights={member.name: member.weight for member in mix.members} if mix is not None else None,
    )


def _close_quietly(loop: LoopThread, env: Environment[Any, Any]) -> None:
    """Close an env the failed build loaded; the build's own error is the one raised."""
    try:
        loop.run(env.aclose())
    except Exception:
        logger.exception("closing %s after the failed build", type(env).__name__)


def _set_version(policy: TokenPolicy, trainer: Any, step: int) -> None:
    """Synchronous: the policy is the trainer's model, at this step's weights."""
    policy.version = step


def _stage(policy: InProcessPolicy, trainer: Any, step: int) -> None:
    """Async: hand the generation copy the weights of this step; batches from now on use them."""
    policy.stage_weights(trainer.model, step)


def _vllm_sync(trainer: Any, policy: TokenPolicy, *, asynchronous: bool) -> Callable[[Any, int], None]:
    """vLLM: TRL pushes the weights before each ``rollout_func`` call. With async
    generation turns may be running then, so the push waits for them to finish
    and holds new ones (the colocated ``LLM`` takes no weights mid-``generate``;
    a server turn is then generated by one version, the one it records)."""
    generation = trainer.vllm_generation
    between_turns = getattr(policy, "between_turns", None)
    if between_turns is not None:
        push = generation.sync_weights

        def sync_weights() -> None:
            with between_turns() if asynchronous else contextlib.nullcontext():
                push()
                policy.version = int(trainer.state.global_step)

        generation.sync_weights = sync_weights

    def before_step(trainer: Any, step: int) -> None:
        policy.version = step

    return before_step


def _run_dir(config: TrainConfig) -> Path:
    if config.run_dir is not None:
        return Path(config.run_dir)
    if config.resume:
        raise TrainError("--resume needs --run-dir: the run to continue")
    return default_run_dir(config.env, prefix="train-")


def _policy_endpoint(config: TrainConfig) -> str:
    """Where the policy's completions come from, as a run's provenance names it."""
    if config.vllm == "server":
        return str(config.vllm_url)
    return POLICY_URL if config.vllm is None else f"vllm {config.vllm} (in-process)"


def _run_session(
    run_dir: Path, config: TrainConfig, dataset: Sequence[Example], origin: RunOrigin
) -> tuple[RunSession, int]:
    if config.resume:
        session = RunSession.resume(run_dir, origin=origin)
        batches = session.writer.batches()
        return session, (max(batches) + 1 if batches else 0)
    session = RunSession.create(
        run_dir,
        kind="train",
        meta=RunMeta(env_class=config.env, model=config.model, train=config.to_meta()),
        origin=origin,
    )
    session.add_examples("train", dataset)
    provenance = session.run_meta().provenance
    if config.curriculum is not None and provenance is not None:
        # what chose the examples is part of what made the run (its state per step: sampler_states)
        session.update_meta(provenance=replace(provenance, extra={**provenance.extra, "curriculum": config.curriculum}))
    return session, 0


def _components(config: TrainConfig, bridge: RolloutBridge, dataset: Sequence[Example]) -> tuple[str, ...]:
    """Weighted components first, then any a probe group of the first example emits
    (in a mixture: of each env's first example, so every env's components are known)."""
    names = list(config.weights)
    firsts: dict[str | None, Example] = {}
    for example in dataset:
        firsts.setdefault(example.env, example)
    groups = [
        (example, [f"{'probe' if number == 0 else f'probe{number}'}-{index}" for index in range(config.group_size)])
        for number, example in enumerate(firsts.values())
    ]

    async def probe_all() -> list[GroupResult]:
        # the envs' probe groups at once: the policy batches their turns together
        return list(await asyncio.gather(*(bridge._run_group(example, ids) for example, ids in groups)))

    outcomes = []
    for probe in bridge.loop.run(probe_all()):
        bridge.policy.release([outcome.rollout_id for outcome in probe.outcomes])
        outcomes += probe.outcomes
    for outcome in outcomes:
        for name in outcome.rewards:
            if name not in names:
                names.append(name)
    if not names:
        reasons = sorted({outcome.termination_reason for outcome in outcomes})
        errors = [outcome.error for outcome in outcomes if outcome.error]
        raise TrainError(
            f"the probe rollouts emitted no reward components (termination: {reasons}"
            f"{'; ' + errors[0] if errors else ''}); name them with --weight NAME=W"
        )
    return tuple(names)
