"""A training run's configuration and result: what ``benchmax train`` is asked to do and what it did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmax.errors import BenchmaxError
from benchmax.loading import EnvSpec
from benchmax.mix import MixSpec
from benchmax.runner import target_fields
from benchmax.telemetry import TelemetrySettings
from benchmax.train import _model as model_loading
from benchmax.train._eval import EvalSummary
from benchmax.train._groups import DEAD_GROUP_MODES
from benchmax.train._vllm import VLLM_MODES


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
    credit: str = "outcome"
    """How rewards become advantages: ``outcome`` (GRPO, one per rollout) or ``per_turn``
    (each model turn's return: its turn reward, the discounted later ones and the outcome;
    see docs/env-turns.md)."""
    turn_discount: float = 1.0
    """``gamma`` of the per-turn returns (``credit="per_turn"``), in [0, 1]."""
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
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    """Where traces of the rollouts go (``--otel-endpoint``; docs/telemetry.md). Not stored with
    the run (the endpoint is the user's and may carry credentials): a resume traces only when told."""
    curriculum: str | None = None
    """What each group runs, following how the policy does (``--curriculum SPEC``:
    ``filter``, ``levels``, ``weights``, ``filter+levels``... or ``FILE.py:Class``;
    :func:`benchmax.train.parse_curriculum`). ``None``: shuffled epochs of the training set
    (an endless one: ``uniform``, its examples in order). Stored with the run, and the
    sampler's state after every step, so ``--resume`` continues the same curriculum."""
    mix: MixSpec | None = None
    """A mixture of envs trained on as one (``benchmax train --env A=0.5 --env B=0.5``): its members,
    weights, kwargs and caps, and the seed of its training draw; stored so ``--resume`` loads the same
    mixture. ``env`` then only labels the run; ``env_kwargs`` and ``data_dir`` are per member, in ``mix``."""

    def __post_init__(self) -> None:
        if self.mix is not None and (self.env_kwargs or self.data_dir is not None):
            raise TrainError(
                "a mixture's env kwargs and data directories are per env: give them in its members "
                "(--env-arg NAME:KEY=VALUE, MemberSpec(env_kwargs=..., data_dir=...)), not as env_kwargs or data_dir"
            )
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
        if "num_generations" in self.trl_args:
            raise TrainError(
                "trl_args must not set num_generations: it is the group size (--group-size / group_size), "
                "which sets TRL's num_generations"
            )
        if self.credit not in ("outcome", "per_turn"):
            raise TrainError(f"credit must be 'outcome' or 'per_turn' (--credit outcome|per-turn), got {self.credit!r}")
        if not 0.0 <= self.turn_discount <= 1.0:
            raise TrainError(f"turn_discount must be in [0, 1], got {self.turn_discount!r}")
        if self.eval_group_size < 0:
            raise TrainError(f"eval_group_size must be >= 0 (0: no eval), got {self.eval_group_size}")
        if self.async_steps and self.passes_per_batch != 1:
            raise TrainError(
                "async_steps needs num_iterations=1 (one optimisation pass per batch, the importance "
                "weights are taken against the model at that pass); set async_steps=0 to use num_iterations"
            )

    @classmethod
    def of(cls, env: EnvSpec | MixSpec, **options: Any) -> TrainConfig:
        """A training run of ``env``, typed: one env or a mixture (:func:`target_fields`)."""
        return cls(**target_fields(env), **options)

    @property
    def target(self) -> EnvSpec | MixSpec:
        """What the training run runs, typed: the mixture, or the one env with its kwargs."""
        return self.mix if self.mix is not None else EnvSpec(self.env, self.env_kwargs)

    @property
    def passes_per_batch(self) -> int:
        """TRL's ``num_iterations``: optimisation passes over each generated batch."""
        return int(self.trl_args.get("num_iterations", 1))

    @classmethod
    def from_meta(cls, data: Mapping[str, Any], **changes: Any) -> TrainConfig:
        """The config a training run stored (:meth:`to_meta`), with ``changes`` applied (a resume's
        run dir and limits); a key this version does not know is left out, so an older run resumes."""
        known = {item.name for item in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        for key in ("run_dir", "data_dir"):
            values[key] = Path(values[key]) if values.get(key) else None
        if values.get("mix") is not None:
            values["mix"] = MixSpec.from_json(values["mix"])
        return cls(**{**values, **changes})

    def to_meta(self) -> dict[str, Any]:
        data = asdict(self)
        del data["telemetry"]
        for key in ("run_dir", "data_dir"):
            data[key] = str(data[key]) if data[key] is not None else None
        if self.mix is None:
            del data["mix"]  # a run of one env stores what it always stored
        else:
            data["mix"] = self.mix.to_json()
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
