"""``benchmax train``'s option groups: declared once, each a typed record the command reads whole.

The same mechanism as ``eval``'s (:func:`benchmax.cli._options.option_group`): each group is
shown under its heading in --help and hands the command the values typed, as fields of a
frozen dataclass; the command builds its :class:`~benchmax.train.TrainConfig` from them by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmax.cli._options import option_group, parse_env_args


@option_group("Model")
@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Which policy is trained."""

    model: Annotated[str, typer.Option(help="'embedded' (SmolLM2-135M), a transformers dir or a .gguf.")] = "embedded"


@option_group("Run")
@dataclass(frozen=True, slots=True)
class TrainRunOptions:
    """Where the run is kept, how long it goes, and how much runs at once."""

    run_dir: Annotated[Path | None, typer.Option(help="Where to keep the run (default: runs/train-NAME-TIME).")] = None
    resume: Annotated[Path | None, typer.Option(help="Continue this run dir from its last checkpoint.")] = None
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Rollouts in flight at once, as for eval [default: all of a step's].")
    ] = None
    max_steps: Annotated[int, typer.Option(help="Optimisation steps.")] = 50
    max_minutes: Annotated[float | None, typer.Option(help="Stop after this wall time (checkpointed).")] = None
    save_steps: Annotated[int, typer.Option(help="Checkpoint every N steps.")] = 10
    seed: Annotated[int, typer.Option(help="Seed of sampling, data order and initialisation.")] = 0
    threads: Annotated[int | None, typer.Option(help="torch CPU threads.")] = None


@option_group("GRPO")
@dataclass(frozen=True, slots=True)
class GrpoOptions:
    """The optimisation: groups, steps, weights and what is trained on."""

    group_size: Annotated[int, typer.Option(help="Rollouts per example (GRPO group).")] = 4
    prompts_per_step: Annotated[int, typer.Option(help="Examples per optimisation step.")] = 4
    learning_rate: Annotated[float, typer.Option(help="The optimizer's learning rate.")] = 5e-6
    weight: Annotated[
        list[str], typer.Option("--weight", metavar="NAME=W", help="Component weight NAME=W (repeatable).")
    ] = field(default_factory=list)
    drop_unscorable: Annotated[
        bool, typer.Option(help="Leave operational failures out of group statistics instead of scoring them 0.")
    ] = False
    credit: Annotated[
        str,
        typer.Option(
            metavar="outcome|per-turn",
            help="Advantages from the outcome per rollout, or per model turn (turn rewards + discounted later ones "
            "+ outcome; docs/env-turns.md).",
        ),
    ] = "outcome"
    turn_discount: Annotated[float, typer.Option(help="Discount of later turn rewards with --credit per-turn.")] = 1.0
    beta: Annotated[float, typer.Option(help="KL coefficient (0: no reference model).")] = 0.0
    trl_arg: Annotated[
        list[str], typer.Option("--trl-arg", metavar="KEY=VALUE", help="Extra GRPOConfig key=value (JSON).")
    ] = field(default_factory=list)
    async_steps: Annotated[
        int | None,
        typer.Option(
            help="Generate up to K steps ahead of training (0: synchronous); IS-corrected. "
            "Default: 1, or 0 with --trl-arg num_iterations>1.",
        ),
    ] = None
    dead_groups: Annotated[
        str, typer.Option(help="'drop': don't train on groups whose siblings all score the same; refill the step.")
    ] = "drop"
    max_refill: Annotated[
        int | None, typer.Option(help="Extra groups a step may draw to replace dead ones (default 2 x prompts).")
    ] = None
    train_layers: Annotated[
        int | None, typer.Option(help="Train only the top N decoder layers (default: every weight).")
    ] = None
    curriculum: Annotated[
        str | None,
        typer.Option(
            metavar="SPEC",
            help="What groups run, following the pass rate: filter, levels, weights, filter+levels, "
            "'levels(promote=0.7,start=2)', or FILE.py:Class (docs/training.md, 'Curricula').",
        ),
    ] = None

    def weights(self) -> dict[str, float]:
        """``--weight NAME=W`` as ``{component: weight}``; anything else is a usage error."""
        weights: dict[str, float] = {}
        for item in self.weight:
            name, sep, raw = item.partition("=")
            try:
                weights[name] = float(raw)
            except ValueError:
                sep = ""
            if not sep or not name:
                raise typer.BadParameter(f"{item!r}: use COMPONENT=WEIGHT, e.g. correct=1.0", param_hint="--weight")
        return weights

    def trl_args(self) -> dict[str, Any]:
        return parse_env_args(self.trl_arg)


@option_group("Sampling")
@dataclass(frozen=True, slots=True)
class RolloutSamplingOptions:
    """How the rollouts trained on are sampled."""

    temperature: Annotated[float, typer.Option(help="Sampling temperature of the rollouts trained on.")] = 1.0
    top_p: Annotated[float, typer.Option(help="Nucleus sampling: sample from the top tokens of this mass.")] = 1.0
    max_tokens: Annotated[int, typer.Option(help="Tokens per model turn.")] = 64


@option_group("vLLM")
@dataclass(frozen=True, slots=True)
class VllmOptions:
    """Generation with TRL's vLLM instead of the in-process policy."""

    vllm: Annotated[
        str | None,
        typer.Option(help="Generate with TRL's vLLM: 'colocate' (in the trainer) or 'server' (needs --vllm-url)."),
    ] = None
    vllm_url: Annotated[str | None, typer.Option(help="A running `vllm serve` for --vllm server.")] = None
    vllm_arg: Annotated[
        list[str],
        typer.Option(
            "--vllm-arg", metavar="KEY=VALUE", help="Extra vLLM sampling key=value (JSON), e.g. repetition_penalty=1.1."
        ),
    ] = field(default_factory=list)

    def sampling(self) -> dict[str, Any]:
        return parse_env_args(self.vllm_arg)


@option_group("Held-out eval")
@dataclass(frozen=True, slots=True)
class HeldOutOptions:
    """The held-out split evaluated before and after training."""

    eval_group_size: Annotated[
        int, typer.Option(help="Evaluate the eval split before and after training, N rollouts per example (0: no).")
    ] = 0
    eval_examples: Annotated[int | None, typer.Option(help="Evaluate at most N eval examples.")] = None
