"""``benchmax train``: GRPO on an env, rollouts by benchmax's engine, curve and checkpoints in the run dir."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmax.auth import bind_model_auth
from benchmax.cli._mix import MixOptions, mix_spec, run_target
from benchmax.cli._options import EnvOptions, OptionalEnvArgument, TelemetryOptions, with_option_groups
from benchmax.cli._train_options import (
    GrpoOptions,
    HeldOutOptions,
    PolicyOptions,
    RolloutSamplingOptions,
    TrainRunOptions,
    VllmOptions,
)
from benchmax.errors import BenchmaxError
from benchmax.mix import MixSpec
from benchmax.telemetry import TelemetrySettings


@with_option_groups
def train_command(
    env: OptionalEnvArgument = None,
    mixture: MixOptions = MixOptions(),
    policy: PolicyOptions = PolicyOptions(),
    env_options: EnvOptions = EnvOptions(),
    max_examples: Annotated[
        int | None, typer.Option(rich_help_panel="Env", help="Train on at most N examples.")
    ] = None,
    run: TrainRunOptions = TrainRunOptions(),
    grpo: GrpoOptions = GrpoOptions(),
    sampling: RolloutSamplingOptions = RolloutSamplingOptions(),
    vllm: VllmOptions = VllmOptions(),
    cache: Annotated[str | None, typer.Option(hidden=True, help="Refused: training never caches replies.")] = None,
    held_out: HeldOutOptions = HeldOutOptions(),
    telemetry: TelemetryOptions = TelemetryOptions(),
) -> None:
    """Train a policy with GRPO on ENV (or a mixture: --env A=0.5 --env B=0.5); rollouts go to the run store."""
    mix = _train_mix(env, mixture.mix_env, env_options, max_examples, mixture.env_max_examples, run.seed, run.resume)
    if cache is not None:
        raise typer.BadParameter(
            "benchmax train never answers from a response cache: each step must sample the policy as it is now, "
            "and a cached reply is an old policy's. --cache is for benchmax eval.",
            param_hint="--cache",
        )
    try:
        from benchmax.train import TrainConfig, train
    except ImportError as exc:
        raise typer.BadParameter(
            f"training needs the train extra ({exc.name or exc} is missing): pip install 'benchmax[train]'"
        ) from None

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "matplotlib", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    traces = telemetry.settings()
    if run.resume is not None:
        config = _resumed_config(TrainConfig, run, env, traces, grpo.curriculum)
        env = config.env if config.mix is None else None  # a mixture is loaded from its stored members
    else:
        target = run_target(env, mix, env_options)
        one = mix is None
        try:
            config = TrainConfig.of(
                target,
                model=policy.model,
                data_dir=env_options.data_dir if one else None,  # a mixture's are its envs'
                max_examples=max_examples if one else None,  # a mixture caps each env
                run_dir=run.run_dir,
                resume=False,
                max_steps=run.max_steps,
                max_minutes=run.max_minutes,
                concurrency=run.concurrency,
                save_steps=run.save_steps,
                seed=run.seed,
                threads=run.threads,
                group_size=grpo.group_size,
                prompts_per_step=grpo.prompts_per_step,
                learning_rate=grpo.learning_rate,
                weights=grpo.weights(),
                drop_unscorable=grpo.drop_unscorable,
                credit=grpo.credit.replace("-", "_"),
                turn_discount=grpo.turn_discount,
                beta=grpo.beta,
                trl_args=grpo.trl_args(),
                async_steps=grpo.async_steps,
                dead_groups=grpo.dead_groups,
                max_refill=grpo.max_refill,
                train_layers=grpo.train_layers,
                curriculum=grpo.curriculum,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                vllm=vllm.vllm,
                vllm_url=vllm.vllm_url,
                vllm_sampling=vllm.sampling(),
                eval_group_size=held_out.eval_group_size,
                eval_examples=held_out.eval_examples,
                telemetry=traces,
            )
        except BenchmaxError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    try:
        with bind_model_auth(env_options.providers()):
            # a mixture (config.mix) is loaded, trained on and closed by the trainer
            result = train(env or "", config=config, reporter=StepTable())
    except (BenchmaxError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _print_result(result)


def _resumed_config(
    config_type: Any, run: TrainRunOptions, env: str | None, traces: TelemetrySettings, curriculum: str | None
) -> Any:
    """The stored config of the run ``--resume`` names, with this session's steps, time and traces;
    it continues its own curriculum (another ``--curriculum`` is refused)."""
    from benchmax.store import Run

    assert run.resume is not None
    try:
        with Run(run.resume) as stored:
            meta = stored.run_meta.train
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--resume") from None
    if meta is None:
        raise typer.BadParameter(f"{run.resume} holds no training run", param_hint="--resume")
    try:
        resumed = config_type.from_meta(
            meta,
            run_dir=run.resume,
            resume=True,
            max_steps=run.max_steps,
            max_minutes=run.max_minutes,
            telemetry=traces,
        )
    except (BenchmaxError, TypeError, ValueError) as exc:
        typer.echo(f"error: {run.resume}: {exc}", err=True)
        raise typer.Exit(2) from None
    if curriculum is not None and curriculum != resumed.curriculum:
        raise typer.BadParameter(
            f"{run.resume} continues its own curriculum ({resumed.curriculum or 'none'}); give no --curriculum",
            param_hint="--curriculum",
        )
    if env is not None and env != resumed.env:
        raise typer.BadParameter(f"{run.resume} trained ENV {resumed.env!r}, not {env!r}", param_hint="ENV")
    return resumed


def _print_result(result: Any) -> None:
    """The run's reward change, its held-out eval before and after, and where its files are."""
    from benchmax.train import eval_table

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
    """Prints one aligned row per training step (the header once, again if the columns change).

    A row wider than the console (a mixture's per-env columns, many components) is folded
    into lines that fit, the same columns on the same line of every step, the continuation
    lines indented: no figure is cut or wrapped mid-cell.
    """

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console if console is not None else Console(highlight=False, soft_wrap=True)
        self.columns: tuple[str, ...] = ()
        self.widths: dict[str, int] = {}
        self.lines: list[list[str]] = []

    def __call__(self, report: Any) -> None:
        cells = report.cells()
        if tuple(cells) != self.columns:
            self.columns = tuple(cells)
            # room for wider values later: a step count grows, a KL gains a digit
            self.widths = {name: max(len(name), len(value), 6) + 1 for name, value in cells.items()}
            self.lines = self._fold(list(cells))
            self._print({name: name for name in cells}, style="bold")
        grown = [name for name, value in cells.items() if len(value) > self.widths[name]]
        for name in grown:
            self.widths[name] = len(cells[name])
        if grown and len(self._fold(list(cells))) != len(self.lines):  # a line would no longer fit
            self.lines = self._fold(list(cells))
            self._print({name: name for name in cells}, style="bold")
        self._print(cells)

    def _fold(self, names: list[str]) -> list[list[str]]:
        room = max(20, self.console.width - 1)
        lines: list[list[str]] = [[]]
        used = 0
        for name in names:
            need = self.widths[name] + (2 if lines[-1] else 0)
            if lines[-1] and used + need > room:
                lines.append([])
                used = 2  # the continuation's indent
                need = self.widths[name]
            lines[-1].append(name)
            used += need
        return lines

    def _print(self, cells: dict[str, str], style: str = "") -> None:
        for index, names in enumerate(self.lines):
            text = "  ".join(cells[name].rjust(self.widths[name]) for name in names)
            self.console.print(("  " if index else "") + text, style=style or None)
