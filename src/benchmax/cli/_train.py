"""``benchmax train``: GRPO on an env, rollouts by benchmax's engine, curve and checkpoints in the run dir."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmax.auth import bind_model_auth
from benchmax.cli._mix import MixOptions, mix_label, mix_spec
from benchmax.cli._options import EnvOptions, OptionalEnvArgument, TelemetryOptions, parse_env_args, with_option_groups
from benchmax.errors import BenchmaxError
from benchmax.mix import MixSpec


def _parse_weights(values: list[str]) -> dict[str, float]:
    weights: dict[str, float] = {}
    for item in values:
        name, sep, raw = item.partition("=")
        try:
            weights[name] = float(raw)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise typer.BadParameter(f"{item!r}: use COMPONENT=WEIGHT, e.g. correct=1.0", param_hint="--weight")
    return weights


@with_option_groups
def train_command(
    env: OptionalEnvArgument = None,
    mixture: MixOptions = MixOptions(),
    model: Annotated[
        str, typer.Option(rich_help_panel="Model", help="'embedded' (SmolLM2-135M), a transformers dir or a .gguf.")
    ] = "embedded",
    env_options: EnvOptions = EnvOptions(),
    max_examples: Annotated[
        int | None, typer.Option(rich_help_panel="Env", help="Train on at most N examples.")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option(rich_help_panel="Run", help="Where to keep the run (default: runs/train-NAME-TIME).")
    ] = None,
    resume: Annotated[
        Path | None, typer.Option(rich_help_panel="Run", help="Continue this run dir from its last checkpoint.")
    ] = None,
    group_size: Annotated[int, typer.Option(rich_help_panel="GRPO", help="Rollouts per example (GRPO group).")] = 4,
    prompts_per_step: Annotated[int, typer.Option(rich_help_panel="GRPO", help="Examples per optimisation step.")] = 4,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, rich_help_panel="Run", help="Rollouts in flight at once, as for eval [default: all of a step's]."
        ),
    ] = None,
    max_steps: Annotated[int, typer.Option(rich_help_panel="Run", help="Optimisation steps.")] = 50,
    max_minutes: Annotated[
        float | None, typer.Option(rich_help_panel="Run", help="Stop after this wall time (checkpointed).")
    ] = None,
    learning_rate: Annotated[float, typer.Option(rich_help_panel="GRPO", help="The optimizer's learning rate.")] = 5e-6,
    temperature: Annotated[
        float, typer.Option(rich_help_panel="Sampling", help="Sampling temperature of the rollouts trained on.")
    ] = 1.0,
    top_p: Annotated[
        float,
        typer.Option(rich_help_panel="Sampling", help="Nucleus sampling: sample from the top tokens of this mass."),
    ] = 1.0,
    max_tokens: Annotated[int, typer.Option(rich_help_panel="Sampling", help="Tokens per model turn.")] = 64,
    weight: Annotated[
        list[str],
        typer.Option(
            "--weight", rich_help_panel="GRPO", metavar="NAME=W", help="Component weight NAME=W (repeatable)."
        ),
    ] = [],  # noqa: B006
    drop_unscorable: Annotated[
        bool,
        typer.Option(
            rich_help_panel="GRPO", help="Leave operational failures out of group statistics instead of scoring them 0."
        ),
    ] = False,
    beta: Annotated[float, typer.Option(rich_help_panel="GRPO", help="KL coefficient (0: no reference model).")] = 0.0,
    save_steps: Annotated[int, typer.Option(rich_help_panel="Run", help="Checkpoint every N steps.")] = 10,
    seed: Annotated[
        int, typer.Option(rich_help_panel="Run", help="Seed of sampling, data order and initialisation.")
    ] = 0,
    threads: Annotated[int | None, typer.Option(rich_help_panel="Run", help="torch CPU threads.")] = None,
    trl_arg: Annotated[
        list[str],
        typer.Option(
            "--trl-arg", rich_help_panel="GRPO", metavar="KEY=VALUE", help="Extra GRPOConfig key=value (JSON)."
        ),
    ] = [],  # noqa: B006
    vllm: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="vLLM",
            help="Generate with TRL's vLLM: 'colocate' (in the trainer) or 'server' (needs --vllm-url).",
        ),
    ] = None,
    vllm_url: Annotated[
        str | None, typer.Option(rich_help_panel="vLLM", help="A running `vllm serve` for --vllm server.")
    ] = None,
    vllm_arg: Annotated[
        list[str],
        typer.Option(
            "--vllm-arg",
            rich_help_panel="vLLM",
            metavar="KEY=VALUE",
            help="Extra vLLM sampling key=value (JSON), e.g. repetition_penalty=1.1.",
        ),
    ] = [],  # noqa: B006
    cache: Annotated[str | None, typer.Option(hidden=True, help="Refused: training never caches replies.")] = None,
    async_steps: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="GRPO",
            help="Generate up to K steps ahead of training (0: synchronous); IS-corrected. "
            "Default: 1, or 0 with --trl-arg num_iterations>1.",
        ),
    ] = None,
    dead_groups: Annotated[
        str,
        typer.Option(
            rich_help_panel="GRPO",
            help="'drop': don't train on groups whose siblings all score the same; refill the step.",
        ),
    ] = "drop",
    max_refill: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="GRPO", help="Extra groups a step may draw to replace dead ones (default 2 x prompts)."
        ),
    ] = None,
    train_layers: Annotated[
        int | None,
        typer.Option(rich_help_panel="GRPO", help="Train only the top N decoder layers (default: every weight)."),
    ] = None,
    curriculum: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="GRPO",
            metavar="SPEC",
            help="What groups run, following the pass rate: filter, levels, weights, filter+levels, "
            "'levels(promote=0.7,start=2)', or FILE.py:Class (docs/training.md, 'Curricula').",
        ),
    ] = None,
    eval_group_size: Annotated[
        int,
        typer.Option(
            rich_help_panel="Held-out eval",
            help="Evaluate the eval split before and after training, N rollouts per example (0: no).",
        ),
    ] = 0,
    eval_examples: Annotated[
        int | None, typer.Option(rich_help_panel="Held-out eval", help="Evaluate at most N eval examples.")
    ] = None,
    telemetry: TelemetryOptions = TelemetryOptions(),
) -> None:
    """Train a policy with GRPO on ENV (or a mixture: --env A=0.5 --env B=0.5); rollouts go to the run store."""
    mix = _train_mix(env, mixture.mix_env, env_options, max_examples, mixture.env_max_examples, seed, resume)
    if cache is not None:
        raise typer.BadParameter(
            "benchmax train never answers from a response cache: each step must sample the policy as it is now, "
            "and a cached reply is an old policy's. --cache is for benchmax eval.",
            param_hint="--cache",
        )
    try:
        from benchmax.train import TrainConfig, eval_table, train
    except ImportError as exc:
        raise typer.BadParameter(
            f"training needs the train extra ({exc.name or exc} is missing): pip install 'benchmax[train]'"
        ) from None
    from benchmax.store import Run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "matplotlib", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    traces = telemetry.settings()
    overrides: dict[str, Any] = {}
    resumed: TrainConfig | None = None
    if resume is not None:
        try:
            with Run(resume) as stored:
                meta = stored.run_meta.train
        except FileNotFoundError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from None
        if meta is None:
            raise typer.BadParameter(f"{resume} holds no training run", param_hint="--resume")
        try:
            resumed = TrainConfig.from_meta(
                meta, run_dir=resume, resume=True, max_steps=max_steps, max_minutes=max_minutes, telemetry=traces
            )
        except (BenchmaxError, TypeError, ValueError) as exc:
            typer.echo(f"error: {resume}: {exc}", err=True)
            raise typer.Exit(2) from None
        if curriculum is not None and curriculum != resumed.curriculum:
            raise typer.BadParameter(
                f"{resume} continues its own curriculum ({resumed.curriculum or 'none'}); give no --curriculum",
                param_hint="--curriculum",
            )
        if env is not None and env != resumed.env:
            raise typer.BadParameter(f"{resume} trained ENV {resumed.env!r}, not {env!r}", param_hint="ENV")
        env = resumed.env if resumed.mix is None else None  # a mixture is loaded from its stored members
    elif env is None and mix is None:
        raise typer.BadParameter("give ENV (or --resume RUN_DIR)", param_hint="ENV")
    else:
        overrides = {
            "model": model,
            "env_kwargs": env_options.kwargs() if mix is None else {},
            "data_dir": env_options.data_dir if mix is None else None,  # a mixture's are its envs'
            "max_examples": max_examples if mix is None else None,  # a mixture caps each env
            "group_size": group_size,
            "prompts_per_step": prompts_per_step,
            "concurrency": concurrency,
            "learning_rate": learning_rate,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "weights": _parse_weights(weight),
            "drop_unscorable": drop_unscorable,
            "beta": beta,
            "save_steps": save_steps,
            "seed": seed,
            "threads": threads,
            "trl_args": parse_env_args(trl_arg),
            "vllm": vllm,
            "vllm_url": vllm_url,
            "vllm_sampling": parse_env_args(vllm_arg),
            "async_steps": async_steps,
            "dead_groups": dead_groups,
            "max_refill": max_refill,
            "train_layers": train_layers,
            "curriculum": curriculum,
            "eval_group_size": eval_group_size,
            "eval_examples": eval_examples,
            "telemetry": traces,
        }
    try:
        config = resumed or TrainConfig(
            env=env if mix is None else mix_label(mix),  # type: ignore[arg-type]
            run_dir=run_dir,
            resume=False,
            max_steps=max_steps,
            max_minutes=max_minutes,
            mix=mix,
            **overrides,
        )
        with bind_model_auth(env_options.providers()):
            # a mixture (config.mix) is loaded, trained on and closed by the trainer
            result = train(env or "", config=config, reporter=StepTable())
    except (BenchmaxError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    points = result.rewards()
    if points:
        first, last = points[0], points[-1]
        typer.echo(
            f"trained {result.steps} steps: mean reward {first[1]:.3f} (step {first[0]})"
            f" -> {last[1]:.3f} (step {last[0]})"
        )
    before, after = result.eval_before, result.eval_after
    if before is not None and after is not None:
        typer.echo(f"held-out eval ({after.rollouts} rollouts each), step 0 -> step {result.steps}:")
        for name in sorted(set(before.means) | set(after.means)):
            start, end = before.means.get(name), after.means.get(name)
            change = f" ({end - start:+.3f})" if start is not None and end is not None else ""
            typer.echo(f"  {name}: {_mean(start)} -> {_mean(end)}{change}")
        for line in eval_table(before, after, steps=result.steps):
            typer.echo(line)
        typer.echo(f"  runs: {before.run_dir}, {after.run_dir}")
    else:
        for label, summary in (("eval before", before), ("eval after", after)):
            if summary is not None:
                typer.echo(f"{label}: {summary.line()}  [{summary.run_dir}]")
    typer.echo(f"run: {result.run_dir}")
    if result.curve is not None:
        typer.echo(f"reward curve: {result.curve}")
    if result.curves:
        typer.echo(f"curves: {result.curves[0].parent} ({', '.join(path.stem for path in result.curves)})")


def _train_mix(
    env: str | None,
    options: list[str],
    env_options: EnvOptions,
    max_examples: int | None,
    env_max_examples: list[str],
    seed: int,
    resume: Path | None,
) -> MixSpec | None:
    """The mixture the command line names (checked before anything heavy is imported), or ``None``."""
    mix = mix_spec(
        [env] if env is not None else [],
        options,
        env_args=env_options.env_arg,
        max_examples=max_examples,
        env_max_examples=env_max_examples,
        seed=seed,
        data_dirs=env_options.data_dirs,
    )
    if mix is not None and resume is not None:
        raise typer.BadParameter(
            "a training run of a mixture is resumed from its stored config: give no ENV or --env", param_hint="--resume"
        )
    return mix


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class StepTable:
    """Prints one aligned row per training step (the header once, again if the columns change)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, soft_wrap=True)
        self.columns: tuple[str, ...] = ()
        self.widths: dict[str, int] = {}

    def __call__(self, report: Any) -> None:
        cells = report.cells()
        if tuple(cells) != self.columns:
            self.columns = tuple(cells)
            self.widths = {name: max(len(name), len(value), 6) for name, value in cells.items()}
            self.console.print("  ".join(name.rjust(self.widths[name]) for name in cells), style="bold")
        for name, value in cells.items():
            self.widths[name] = max(self.widths[name], len(value))
        self.console.print("  ".join(value.rjust(self.widths[name]) for name, value in cells.items()))
