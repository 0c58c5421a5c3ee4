"""``benchmax train``: GRPO through TRL on any benchmax environment.

TRL owns the optimisation (advantages, clipping, checkpoints); benchmax owns the
rollouts. Every step samples from the model being trained: by default the
policy model serves the engine in-process; with ``vllm="server"`` or
``"colocate"`` TRL's vLLM generates (TRL pushes the new weights to it before
each step) through :mod:`benchmax.train.vllm`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from benchmax.aio import LoopThread
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, Example, SamplingParams
from benchmax.errors import BenchmaxError
from benchmax.loading import EnvSpec, data_directories, open_examples
from benchmax.runner import RunOrigin, RunSession, default_run_dir
from benchmax.train import _model as model_loading
from benchmax.train._eval import POLICY_URL, EvalSummary, eval_policy
from benchmax.train._groups import DEAD_GROUP_MODES
from benchmax.train._grpo import trainer_class
from benchmax.train._plot import component_curves, reward_curve
from benchmax.train._policy import InProcessPolicy, TokenPolicy
from benchmax.train._report import StepReport, step_report
from benchmax.train._rewards import component_reward
from benchmax.train._rollouts import RolloutBridge
from benchmax.train._vllm import VLLM_MODES, vllm_policy

logger = logging.getLogger("benchmax.train")

CHECKPOINTS = "checkpoints"
CURVE = "reward_curve.png"
CURVES = "curves"
METRICS = "metrics.jsonl"


class TrainError(BenchmaxError, ValueError):
    """The training run cannot start as configured; the message says what to change."""


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """One GRPO run. ``weights``: reward components' weights (the others, found by a probe group, weigh 1.0).
    ``concurrency``: rollouts in flight, steps generated ahead included (``None``: a step's all at once)."""

    env: str = ""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    model: str = model_loading.EMBEDDED
    run_dir: Path | None = None
    data_dir: Path | None = None
    max_examples: int | None = None
    group_size: int = 4
    prompts_per_step: int = 4
    max_steps: int = 50
    learning_rate: float = 5e-6
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    weights: Mapping[str, float] = field(default_factory=dict)
    drop_unscorable: bool = False
    beta: float = 0.0
    save_steps: int = 10
    max_minutes: float | None = None
    """Stop (after the step in progress, with a checkpoint) once this much wall time passed."""
    seed: int = 0
    resume: bool = False
    batch_window: float = 0.005
    threads: int | None = None
    trl_args: Mapping[str, Any] = field(default_factory=dict)
    """Extra ``GRPOConfig`` fields, passed through unchanged."""
    vllm: str | None = None
    """Generate with TRL's vLLM: ``"server"`` (a running ``vllm serve``, at ``vllm_url``)
    or ``"colocate"`` (an ``LLM`` inside the trainer). ``None``: the in-process policy."""
    vllm_url: str | None = None
    vllm_sampling: Mapping[str, Any] = field(default_factory=dict)
    """Extra vLLM sampling fields for every turn (``logit_bias``, ``repetition_penalty``...)."""
    concurrency: int | None = None
    async_steps: int | None = None
    """Generate up to this many steps ahead of the trainer (0: synchronous). Rollouts are at
    most this many updates stale; the importance weights correct for it. ``None``: 1, or 0
    when ``trl_args`` asks for several optimisation passes per batch (``_auto_async_steps``)."""
    dead_groups: str = "drop"
    """``drop``: groups whose siblings all score the same are not trained on, and the step is
    refilled from further examples (up to ``max_refill``); ``keep``: train on them."""
    max_refill: int | None = None
    """Extra groups a step may draw to replace dead ones (default: 2 x ``prompts_per_step``)."""
    train_layers: int | None = None
    """Train only the top N transformer layers (and the final norm); ``None``: every weight."""
    eval_group_size: int = 0
    """Evaluate the held-out (``eval``) split before and after training with this many
    rollouts per example (0: no eval), through the runner's eval path."""
    eval_examples: int | None = None

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise TrainError(f"group_size must be >= 2 for GRPO (advantages are group-relative), got {self.group_size}")
        if self.prompts_per_step < 1 or self.max_steps < 1 or (self.concurrency is not None and self.concurrency < 1):
            raise TrainError("prompts_per_step, max_steps and concurrency must be >= 1")
        if not self.temperature > 0:
            raise TrainError(f"temperature must be > 0 to sample a group, got {self.temperature}")
        if self.vllm is not None and self.vllm not in VLLM_MODES:
            raise TrainError(f"vllm must be 'server' or 'colocate', got {self.vllm!r}")
        if self.vllm == "server" and not self.vllm_url:
            raise TrainError(
                "vllm='server' needs vllm_url (--vllm-url http://HOST:PORT of a running "
                "`VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config '{\"backend\": \"nccl\"}'`)"
            )
        if self.vllm_url and self.vllm != "server":
            raise TrainError("vllm_url is only used with vllm='server'")
        if self.async_steps is not None and self.async_steps < 0:
            raise TrainError(f"async_steps must be >= 0 (0: synchronous), got {self.async_steps}")
        if self.dead_groups not in DEAD_GROUP_MODES:
            raise TrainError(f"dead_groups must be 'drop' or 'keep', got {self.dead_groups!r}")
        if self.max_refill is not None and self.max_refill < 0:
            raise TrainError(f"max_refill must be >= 0, got {self.max_refill}")
        if self.train_layers is not None and self.train_layers < 1:
            raise TrainError(f"train_layers must be >= 1 (or unset: train every weight), got {self.train_layers}")
        if self.eval_group_size < 0:
            raise TrainError(f"eval_group_size must be >= 0 (0: no eval), got {self.eval_group_size}")
        if self.async_steps and self.passes_per_batch != 1:
            raise TrainError(
                "async_steps needs num_iterations=1 (one optimisation pass per batch, the importance "
                "weights are taken against the model at that pass); set async_steps=0 to use num_iterations"
            )

    @property
    def passes_per_batch(self) -> int:
        """TRL's ``num_iterations``: optimisation passes over each generated batch."""
        return int(self.trl_args.get("num_iterations", 1))

    def to_meta(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("run_dir", "data_dir"):
            data[key] = str(data[key]) if data[key] is not None else None
        return data


@dataclass(frozen=True, slots=True)
class TrainResult:
    run_dir: Path
    steps: int
    log_history: tuple[Mapping[str, Any], ...]
    components: tuple[str, ...]
    curve: Path | None
    curves: tuple[Path, ...] = ()
    """One image per reward component, the dead-group share and the IS ratio / KL."""
    eval_before: EvalSummary | None = None
    eval_after: EvalSummary | None = None
    train_seconds: float = 0.0
    """Wall time of the training loop (model load, probe and eval excluded)."""

    def rewards(self) -> list[tuple[int, float]]:
        """``(step, mean reward)`` for every logged step."""
        return [(int(e["step"]), float(e["reward"])) for e in self.log_history if "reward" in e]


@dataclass
class TrainingSession:
    """A built but not yet started run: the trainer plus what it drives; ``close()`` releases them all."""

    trainer: Any
    bridge: RolloutBridge
    policy: TokenPolicy
    """The policy that generates training rollouts (in-process, or vLLM's)."""
    engine: Engine
    env: BaseEnv
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


def train(
    env: str | BaseEnv = "",
    *,
    config: TrainConfig | None = None,
    reporter: Callable[[StepReport], None] | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train a policy with GRPO on ``env`` (a spec string or an env instance).

    ``train("examples/format", model="embedded", max_steps=40)`` writes the run
    store, checkpoints, ``metrics.jsonl``, ``reward_curve.png`` and ``curves/``
    into the run dir. ``reporter`` receives each step's :class:`StepReport`.
    """
    session = build(env, config=config, reporter=reporter, **overrides)
    try:
        return run(session)
    finally:
        session.close()


def run(session: TrainingSession) -> TrainResult:
    checkpoints = session.run_dir / CHECKPOINTS
    resume = session.config.resume and any(checkpoints.glob("checkpoint-*"))
    reporter = _StepCallback(session)
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
            stored.set_meta(
                steps=session.trainer.state.global_step,
                train_seconds=seconds,
                evals={
                    summary.run_dir.name: {"step": step, "means": dict(summary.means), "rollouts": summary.rollouts}
                    for step, summary in ((0, before), (session.trainer.state.global_step, after))
                    if summary is not None
                },
            )
    history = tuple(session.trainer.state.log_history)
    title = f"{session.config.env} · {session.config.model}"
    curve = _write_logs(session.run_dir, history, title=title)
    curves = tuple(component_curves(history, session.run_dir / CURVES, title=title))
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
        data_dir=session.base_dir,
        name=config.model,
        loop=session.loop,
        batch_window=config.batch_window,
    )
    logger.info("eval at step %d: %s (%.0fs)", step, summary.line(), time.perf_counter() - started)
    return summary


def build(
    env: str | BaseEnv = "",
    *,
    config: TrainConfig | None = None,
    reporter: Callable[[StepReport], None] | None = None,
    **overrides: Any,
) -> TrainingSession:
    """Load everything and construct TRL's ``GRPOTrainer`` without starting it.

    ``reporter`` receives each step's :class:`StepReport` (the CLI prints one line).
    """
    from dataclasses import replace

    config = replace(config or TrainConfig(), **overrides)
    if isinstance(env, BaseEnv):
        env_obj, owns_env = env, False
        spec_name = config.env or type(env).__name__
        places: tuple[Path, ...] = (Path(config.data_dir or Path.cwd()),)
    else:
        spec_name = env or config.env
        if not spec_name:
            raise TrainError("no environment given: pass ENV (path/to/env.py[:Class], module:Class or a directory)")
        env_obj, places = _load_env(spec_name, config)
        owns_env = True
    config = replace(config, env=spec_name)
    if config.async_steps is None:
        steps, why = _auto_async_steps(config)
        config = replace(config, async_steps=steps)
        logger.info("async_steps=%d by default: %s (--async-steps K to choose)", steps, why)
    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    run_dir = _run_dir(config)
    loop = LoopThread(name="benchmax-train-loop")
    run_session = None
    policy = None
    try:
        stream = loop.run(open_examples(env_obj, "train", places, max_examples=config.max_examples))
        base_dir = stream.base_dir or places[0]
        dataset = list(stream)
        if not dataset:
            raise TrainError(f"{spec_name}: create_dataset('train') returned no examples")
        examples = {example.id: example for example in dataset}
        model, tokenizer = model_loading.load(config.model)
        if config.train_layers is not None:
            freeze_below(model, config.train_layers)
        policy = InProcessPolicy(
            model, tokenizer, default_max_tokens=config.max_tokens, batch_window=config.batch_window
        )
        engine = Engine(env_obj, EngineConfig())
        engine.clients.register(POLICY_URL, policy)
        sampling = SamplingParams(temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens)
        origin = RunOrigin(
            env=env_obj,
            spec=EnvSpec(spec_name, config.env_kwargs) if owns_env else None,
            dataset=stream.dataset,
            model=config.model,
            endpoint=_policy_endpoint(config),
            sampling=sampling,
        )
        run_session, first_batch = _run_session(run_dir, config, dataset, origin)
        bridge = RolloutBridge(
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
            concurrency=config.concurrency,
            seed=config.seed + first_batch,
        )
        components = _components(config, bridge, dataset)
        bridge.known_components = frozenset(components)
        if config.vllm == "colocate":
            _loadable_by_vllm(model, tokenizer, run_dir)
        trainer = _trainer(config, model, tokenizer, bridge, components, examples, run_dir)
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
    except BaseException as exc:
        loop.close()
        if policy is not None:
            policy.close()
        if run_session is not None:
            run_session.abandon(exc)
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
    )


def freeze_below(model: Any, layers: int) -> None:
    """Train only the top ``layers`` decoder layers and the final norm.

    Backward then stops at the lowest trained layer: on a CPU the step costs
    about a forward pass plus ``layers / total`` of a backward one. With tied
    embeddings (SmolLM2) the LM head stays frozen with them.
    """
    blocks = getattr(getattr(model, "model", None), "layers", None)
    if blocks is None or not hasattr(blocks, "__len__"):
        raise TrainError(f"train_layers needs a decoder with model.model.layers; {type(model).__name__} has none")
    if layers > len(blocks):
        raise TrainError(f"train_layers={layers}, but the model has {len(blocks)} layers")
    model.requires_grad_(False)
    for block in list(blocks)[len(blocks) - layers :]:
        block.requires_grad_(True)
    norm = getattr(model.model, "norm", None)
    if norm is not None:
        norm.requires_grad_(True)


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


def _load_env(spec: str, config: TrainConfig) -> tuple[BaseEnv, tuple[Path, ...]]:
    """The env, and where its data is looked for (its train split picks the one that holds it)."""
    env_spec = EnvSpec(spec, dict(config.env_kwargs or {}))
    env = env_spec.load()
    if not isinstance(env, BaseEnv):
        raise TrainError(f"{spec}: {type(env).__name__} is not a BaseEnv; training drives the standard model loop")
    return env, data_directories(env_spec, config.data_dir)


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
        meta={"env_class": config.env, "model": config.model, "train": config.to_meta()},
        origin=origin,
    )
    session.add_examples("train", dataset)
    return session, 0


def _components(config: TrainConfig, bridge: RolloutBridge, dataset: Sequence[Example]) -> tuple[str, ...]:
    """Weighted components first, then any a probe group of the first example emits."""
    names = list(config.weights)
    probe = bridge.loop.run(
        bridge._run_group(dataset[0], [f"probe-{index}" for index in range(config.group_size)])
    )
    bridge.policy.release([outcome.rollout_id for outcome in probe.outcomes])
    for outcome in probe.outcomes:
        for name in outcome.rewards:
            if name not in names:
                names.append(name)
    if not names:
        reasons = sorted({outcome.termination_reason for outcome in probe.outcomes})
        errors = [outcome.error for outcome in probe.outcomes if outcome.error]
        raise TrainError(
            f"the probe rollouts emitted no reward components (termination: {reasons}"
            f"{'; ' + errors[0] if errors else ''}); name them with --weight NAME=W"
        )
    return tuple(names)


def _trainer(
    config: TrainConfig,
    model: Any,
    tokenizer: Any,
    bridge: RolloutBridge,
    components: Sequence[str],
    examples: Mapping[str, Any],
    run_dir: Path,
) -> Any:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # TRL imports weave when it is installed, and weave reports errors to Sentry over the network.
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    from datasets import Dataset as ArrowDataset
    from transformers import PrinterCallback
    from trl import GRPOConfig

    batch = config.prompts_per_step * config.group_size
    arguments: dict[str, Any] = {
        "output_dir": str(run_dir / CHECKPOINTS),
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": 1,
        "num_generations": config.group_size,
        "max_completion_length": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "learning_rate": config.learning_rate,
        "beta": config.beta,
        "max_steps": config.max_steps,
        "logging_steps": 1,
        "save_steps": config.save_steps,
        "save_total_limit": 2,
        "reward_weights": [float(config.weights.get(name, 1.0)) for name in components],
        "report_to": "none",
        "use_cpu": not _cuda(),
        "bf16": False,
        "seed": config.seed,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }
    if config.vllm is not None:
        arguments.update(use_vllm=True, vllm_mode=config.vllm)
        if config.vllm == "server":
            arguments["vllm_server_base_url"] = config.vllm_url
        else:
            # the default (0.9) leaves the trainer no room on a shared GPU
            arguments["vllm_gpu_memory_utilization"] = 0.3
    if config.vllm is None or config.async_steps:
        # in-process or stale rollouts: truncated per-token importance weights (TIS); TRL's
        # default for vLLM (sequence_mask) drops a whole sequence once its ratio passes the cap
        arguments["vllm_importance_sampling_mode"] = "token_truncate"
    arguments.update(config.trl_args)
    if not {"gradient_checkpointing", "activation_checkpointing"} & set(config.trl_args):
        # TRL turns it on by default; it trades compute for memory a CPU run has plenty of,
        # and it makes backward run through frozen layers (train_layers). Under its current
        # name where transformers has one: the old name prints a FutureWarning mid-run.
        renamed = "activation_checkpointing" in GRPOConfig.__dataclass_fields__
        arguments["activation_checkpointing" if renamed else "gradient_checkpointing"] = False
    trainer = trainer_class()(
        model=model,
        reward_funcs=[component_reward(name, drop_unscorable=config.drop_unscorable) for name in components],
        args=GRPOConfig(**arguments),
        train_dataset=ArrowDataset.from_dict({"prompt": list(examples)}),
        processing_class=tokenizer,
        rollout_func=bridge,
        callbacks=[_RunLogCallback(run_dir, f"{config.env} · {config.model}", config.max_minutes)],
    )
    trainer.benchmax_correct = config.passes_per_batch == 1
    # benchmax reports each step itself (a line per step, metrics.jsonl, the run store)
    trainer.remove_callback(PrinterCallback)
    return trainer


def _auto_async_steps(config: TrainConfig) -> tuple[int, str]:
    """The ``async_steps`` a config that names none gets, and why.

    One step ahead by default: even on a CPU, where generation and the
    training step share the cores, the overlap did the same work in less time
    (1.11x steps per minute at equal rollouts and tokens, ``docs/training.md``).
    Several optimisation passes per batch (``num_iterations`` > 1) take their
    importance weights at one pass, so they get synchronous steps instead of
    the error an explicit ``async_steps`` gets.
    """
    if config.passes_per_batch != 1:
        return 0, "num_iterations > 1 needs synchronous steps"
    return 1, "generation overlaps the training step"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _loadable_by_vllm(model: Any, tokenizer: Any, run_dir: Path) -> None:
    """Colocated vLLM loads the policy from ``model.name_or_path``: a model read
    from a GGUF file (the embedded one) or built in memory has no such
    directory, so its starting weights are written into the run dir first."""
    source = Path(str(getattr(model, "name_or_path", "") or ""))
    if (source / "config.json").is_file() and any(source.glob("*.safetensors")):
        return
    target = run_dir / "policy-init"
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    model.config._name_or_path = str(target)
    model.name_or_path = str(target)
    logger.info("wrote the starting weights to %s for vLLM to load", target)


def _write_logs(
    run_dir: Path, history: Sequence[Mapping[str, Any]], *, title: str, plot: bool = True
) -> Path | None:
    with (run_dir / METRICS).open("wb") as handle:
        for entry in history:
            handle.write(orjson.dumps(dict(entry), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    return reward_curve(history, run_dir / CURVE, title=title) if plot else None


def _callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class _RunLogCallback(_callback_base()):  # type: ignore[misc]
    """Keeps ``metrics.jsonl`` and the reward curve current at every log and save."""

    def __init__(self, run_dir: Path, title: str, max_minutes: float | None = None) -> None:
        self.run_dir = run_dir
        self.title = title
        self.max_minutes = max_minutes
        self.started = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.max_minutes is not None and time.perf_counter() - self.started > 60 * self.max_minutes:
            logger.info("--max-minutes %g reached at step %d; stopping", self.max_minutes, state.global_step)
            control.should_training_stop = True
            control.should_save = True

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=False)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=True)


class _StepCallback(_callback_base()):  # type: ignore[misc]
    """At each step's log: the step's figures into the run store and one line for a person.

    The run store's ``steps`` row holds every figure TRL and the bridge logged
    for the step (rewards per component, dead groups, IS ratio, KL, staleness,
    timings) plus the rollouts the token check flagged, under the step number
    the step's rollouts carry.
    """

    def __init__(self, session: TrainingSession) -> None:
        self.session = session

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not logs or "reward" not in logs:
            return
        trained = int(state.global_step)
        step = trained - 1  # the rollouts of the step that led to this update
        batch = self.session.bridge.history.pop(step, None)
        for old in [key for key in self.session.bridge.history if key < step]:
            del self.session.bridge.history[old]
        metrics: dict[str, Any] = {key: value for key, value in logs.items() if _plain_number(value)}
        metrics["trainer_step"] = trained
        if batch is not None:
            metrics["mismatched_rollouts"] = [
                {"rollout_id": check.rollout_id, "detail": check.detail}
                for check in batch.checks
                if check.status == "mismatch"
            ]
        if self.session.run_session is not None:
            try:
                self.session.run_session.record_step(step, metrics)
            except Exception:
                logger.exception("recording step %d in the run store failed", step)
        report = step_report(trained, int(args.max_steps or 0) or None, logs, self.session.components)
        if self.session.reporter is not None:
            self.session.reporter(report)
        else:
            logger.info("%s", report.line())


def _plain_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or isinstance(value, str)


def _write_logs_quiet(run_dir: Path, history: Sequence[Mapping[str, Any]], title: str, *, plot: bool) -> None:
    """Progress files must never stop a training step."""
    try:
        _write_logs(run_dir, history, title=title, plot=plot)
    except Exception:
        logger.exception("writing %s failed", run_dir / METRICS)
