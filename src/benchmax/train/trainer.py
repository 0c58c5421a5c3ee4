"""``benchmax train``: GRPO through TRL on any benchmax environment.

TRL owns the optimisation (advantages, clipping, checkpoints); benchmax owns the
rollouts. Every step samples from the model being trained: by default the
policy model serves the engine in-process; with ``vllm="server"`` or
``"colocate"`` TRL's vLLM generates (TRL pushes the new weights to it before
each step) through :mod:`benchmax.train.vllm`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchmax.engine.engine import Engine, EngineConfig
from benchmax.envs.base_env import BaseEnv
from benchmax.envs.dataset import Dataset
from benchmax.envs.rollout import SamplingParams
from benchmax.train import model as model_loading
from benchmax.train.plot import reward_curve
from benchmax.train.policy import InProcessPolicy, TokenPolicy
from benchmax.train.rewards import component_reward
from benchmax.train.rollouts import EventLoopThread, RolloutBridge
from benchmax.train.vllm import VLLM_MODES, vllm_policy

logger = logging.getLogger("benchmax.train")

POLICY_URL = "inprocess://policy"
"""The base URL the trainer's in-process policy is registered under."""
CHECKPOINTS = "checkpoints"
CURVE = "reward_curve.png"
METRICS = "metrics.jsonl"


class TrainError(ValueError):
    """The training run cannot start as configured; the message says what to change."""


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """One GRPO run. ``weights`` maps reward components to weights; components not
    named are found by a probe group before training and weighted 1.0."""

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

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise TrainError(f"group_size must be >= 2 for GRPO (advantages are group-relative), got {self.group_size}")
        if self.prompts_per_step < 1 or self.max_steps < 1:
            raise TrainError("prompts_per_step and max_steps must be >= 1")
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

    def rewards(self) -> list[tuple[int, float]]:
        """``(step, mean reward)`` for every logged step."""
        return [(int(e["step"]), float(e["reward"])) for e in self.log_history if "reward" in e]


@dataclass
class Session:
    """A built but not yet started run: the trainer plus what it drives.

    ``close()`` releases the env, engine, store and event loop.
    """

    trainer: Any
    bridge: RolloutBridge
    policy: TokenPolicy
    """The policy that generates training rollouts (in-process, or vLLM's)."""
    engine: Engine
    env: BaseEnv
    writer: Any
    loop: EventLoopThread
    config: TrainConfig
    run_dir: Path
    components: tuple[str, ...]
    owns_env: bool = True
    probe_policy: TokenPolicy | None = None
    """The in-process policy that ran the probe group, when vLLM generates the rest."""

    def close(self) -> None:
        try:
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
            if self.writer is not None:
                self.writer.close()


def train(env: str | BaseEnv = "", *, config: TrainConfig | None = None, **overrides: Any) -> TrainResult:
    """Train a policy with GRPO on ``env`` (a spec string or an env instance).

    ``train("examples/format", model="embedded", max_steps=40)`` writes the run
    store, checkpoints, ``metrics.jsonl`` and ``reward_curve.png`` into the run dir.
    """
    session = build(env, config=config, **overrides)
    try:
        return run(session)
    finally:
        session.close()


def run(session: Session) -> TrainResult:
    checkpoints = session.run_dir / CHECKPOINTS
    resume = session.config.resume and any(checkpoints.glob("checkpoint-*"))
    session.trainer.train(resume_from_checkpoint=True if resume else None)
    history = tuple(session.trainer.state.log_history)
    if session.writer is not None:
        session.writer.set_meta(status="finished", ended_at=time.time(), steps=session.trainer.state.global_step)
    curve = _write_logs(session.run_dir, history, title=f"{session.config.env} · {session.config.model}")
    return TrainResult(
        run_dir=session.run_dir,
        steps=int(session.trainer.state.global_step),
        log_history=history,
        components=session.components,
        curve=curve,
    )


def build(env: str | BaseEnv = "", *, config: TrainConfig | None = None, **overrides: Any) -> Session:
    """Load everything and construct TRL's ``GRPOTrainer`` without starting it."""
    from dataclasses import replace

    config = replace(config or TrainConfig(), **overrides)
    if isinstance(env, BaseEnv):
        env_obj, owns_env = env, False
        spec_name = config.env or type(env).__name__
        base_dir = config.data_dir or Path.cwd()
    else:
        spec_name = env or config.env
        if not spec_name:
            raise TrainError("no environment given: pass ENV (path/to/env.py[:Class], module:Class or a directory)")
        env_obj, base_dir = _load_env(spec_name, config)
        owns_env = True
    config = replace(config, env=spec_name)
    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    run_dir = _run_dir(config)
    loop = EventLoopThread()
    writer = None
    policy = None
    try:
        dataset = loop.run(env_obj.create_dataset("train", base_dir, max_examples=config.max_examples))
        if not isinstance(dataset, Dataset) or len(dataset) == 0:
            raise TrainError(f"{spec_name}: create_dataset('train') returned no examples")
        examples = {example.id: example for example in dataset}
        model, tokenizer = model_loading.load(config.model)
        policy = InProcessPolicy(
            model, tokenizer, default_max_tokens=config.max_tokens, batch_window=config.batch_window
        )
        engine = Engine(env_obj, EngineConfig())
        engine.clients.register(POLICY_URL, policy)
        writer, first_batch = _writer(run_dir, config, dataset)
        bridge = RolloutBridge(
            engine=engine,
            examples=examples,
            tokenizer=tokenizer,
            base_url=POLICY_URL,
            model=config.model,
            sampling=SamplingParams(
                temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens
            ),
            writer=writer,
            loop=loop,
            policy=policy,
            first_batch=first_batch,
            example_index={example.id: index for index, example in enumerate(dataset)},
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
    except BaseException:
        loop.close()
        if policy is not None:
            policy.close()
        if writer is not None:
            writer.close()
        raise
    return Session(
        trainer,
        bridge,
        policy,
        engine,
        env_obj,
        writer,
        loop,
        config,
        run_dir,
        components,
        owns_env,
        probe_policy=probe_policy,
    )


def _load_env(spec: str, config: TrainConfig) -> tuple[BaseEnv, Path]:
    from benchmax.runner.env_spec import EnvSpec

    env_spec = EnvSpec(spec, dict(config.env_kwargs))
    env = env_spec.load()
    if not isinstance(env, BaseEnv):
        raise TrainError(
            f"{spec}: {type(env).__name__} is not a BaseEnv; training drives the standard model loop"
        )
    base_dir = config.data_dir or env_spec.directory or Path.cwd()
    return env, base_dir


def _run_dir(config: TrainConfig) -> Path:
    if config.run_dir is not None:
        return Path(config.run_dir)
    if config.resume:
        raise TrainError("--resume needs --run-dir: the run to continue")
    name = Path(config.env.rstrip("/").split(":")[0]).stem or "run"
    return Path("runs") / f"train-{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _writer(run_dir: Path, config: TrainConfig, dataset: Dataset) -> tuple[Any, int]:
    from benchmax.store import RunWriter

    if config.resume:
        writer = RunWriter.resume(run_dir)
        writer.set_meta(status="running")
        batches = writer.batches()
        return writer, (max(batches) + 1 if batches else 0)
    meta = {
        "kind": "train",
        "env_class": config.env,
        "model": config.model,
        "started_at": time.time(),
        "status": "running",
        "train": config.to_meta(),
    }
    writer = RunWriter.create(run_dir, meta)
    writer.add_examples("train", dataset)
    return writer, 0


def _components(config: TrainConfig, bridge: RolloutBridge, dataset: Dataset) -> tuple[str, ...]:
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
    from trl import GRPOConfig, GRPOTrainer

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
    arguments.update(config.trl_args)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[component_reward(name, drop_unscorable=config.drop_unscorable) for name in components],
        args=GRPOConfig(**arguments),
        train_dataset=ArrowDataset.from_dict({"prompt": list(examples)}),
        processing_class=tokenizer,
        rollout_func=bridge,
        callbacks=[_RunLogCallback(run_dir, f"{config.env} · {config.model}", config.max_minutes)],
    )
    return trainer


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
        if logs and "reward" in logs:
            logger.info(
                "step %d: reward %.3f (%.0fs)", state.global_step, logs["reward"], time.perf_counter() - self.started
            )
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=False)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _write_logs_quiet(self.run_dir, state.log_history, self.title, plot=True)


def _write_logs_quiet(run_dir: Path, history: Sequence[Mapping[str, Any]], title: str, *, plot: bool) -> None:
    """Progress files must never stop a training step."""
    try:
        _write_logs(run_dir, history, title=title, plot=plot)
    except Exception:
        logger.exception("writing %s failed", run_dir / METRICS)
