"""``benchmax eval``: run an env against a model, keep every rollout, print a summary.

Exit codes: 0 the run did its job; 1 it did not (no rollout could be scored,
operational failures above ``--max-failure-rate``, the model endpoint could not
serve, or an outage outlasted ``--max-outage``); 2 bad usage, env or data (a
``--model`` the server does not serve among them);
130 Ctrl-C; 143 SIGTERM. Interrupted and stopped runs print the resume command.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from benchmax.auth import ModelAuth, bind_model_auth, redact_url
from benchmax.cli._mix import MixOptions, mix_spec, run_target
from benchmax.cli._options import (
    ENV_HELP,
    CacheOptions,
    EndpointOptions,
    EnvOptions,
    ExecutorOptions,
    LimitOptions,
    RunOptions,
    SamplingOptions,
    TelemetryOptions,
    with_option_groups,
)
from benchmax.cli._output import command_line, error_line
from benchmax.errors import BenchmaxError
from benchmax.runner import (
    DEFAULT_CONCURRENCY,
    EMBEDDED,
    EndpointError,
    RunConfig,
    RunStopped,
    arun,
)
from benchmax.store import Run

console = Console(stderr=False)

EnvsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="ENV",
        help=ENV_HELP + " Several ENVs run as one mixture (docs/mixtures.md).",
        show_default=False,
    ),
]


@with_option_groups
def eval_command(
    envs: EnvsArgument = None,
    mixture: MixOptions = MixOptions(),
    env_options: EnvOptions = EnvOptions(),
    run: RunOptions = RunOptions(),
    endpoint: EndpointOptions = EndpointOptions(),
    sampling: SamplingOptions = SamplingOptions(),
    limits: LimitOptions = LimitOptions(),
    costs: CacheOptions = CacheOptions(),
    executor: ExecutorOptions = ExecutorOptions(),
    telemetry: TelemetryOptions = TelemetryOptions(),
) -> None:
    """Run ENV against a model; every rollout is stored as it finishes."""
    mix_env, env_max_examples = mixture.mix_env, mixture.env_max_examples
    env = envs[0] if envs and len(envs) == 1 and not mix_env else None
    if costs.max_cost is not None and not costs.max_cost > 0:
        raise typer.BadParameter(
            f"{costs.max_cost:g} is not a budget: give US dollars above 0", param_hint="--max-cost"
        )
    chosen_cache = costs.settings()
    providers = env_options.providers()
    try:
        if run.resume is not None:
            if (envs and len(envs) > 1) or mix_env:
                raise typer.BadParameter(
                    "--resume continues the stored run with the envs it was run with: give no ENV or --env",
                    param_hint="--resume",
                )
            config = _resume_config(run.resume, env, concurrency=run.concurrency, base_url=endpoint.base_url)
            config = replace(
                config,
                cache=chosen_cache if costs.cache is not None else config.cache,
                prices=str(costs.prices) if costs.prices is not None else config.prices,
                max_cost=costs.max_cost if costs.max_cost is not None else config.max_cost,
                engine=replace(config.engine, telemetry=telemetry.settings()),
            )
        else:
            sampling_params = sampling.params()
            mix = mix_spec(
                envs or [],
                mix_env,
                env_args=env_options.env_arg,
                max_examples=run.max_examples,
                env_max_examples=env_max_examples,
                seed=sampling.seed,
                data_dirs=env_options.data_dirs,
            )
            target = run_target(env, mix, env_options)
            if run.batch_size is not None and run.batch_size % run.group_size:
                raise typer.BadParameter(
                    f"{run.batch_size} is not a multiple of --group-size {run.group_size}: "
                    "groups are never split across batches",
                    param_hint="--batch-size",
                )
            config = RunConfig.of(
                target,
                data_dir=env_options.data_dir if mix is None else None,  # a mixture's are its envs'
                split=run.split,
                max_examples=run.max_examples if mix is None else None,  # a mixture caps each env
                group_size=run.group_size,
                concurrency=run.concurrency if run.concurrency is not None else DEFAULT_CONCURRENCY,
                batch_size=run.batch_size,
                model=endpoint.model,
                check_model=endpoint.model_check,
                base_url=tuple(endpoint.base_url) if endpoint.base_url else EMBEDDED,
                api_key_env=endpoint.api_key_env,
                sampling=sampling_params,
                run_dir=run.run_dir,
                pass_threshold=run.pass_threshold,
                max_failure_rate=run.max_failure_rate,
                engine=replace(limits.engine(), telemetry=telemetry.settings()),
                executor=executor.executor,
                ray_address=executor.ray_address,
                workers=executor.workers,
                cache=chosen_cache,
                prices=str(costs.prices) if costs.prices is not None else None,
                max_cost=costs.max_cost,
            ).with_run_dir()
    except ValueError as exc:  # RunConfig's checks (replicas, credentials): the message names the option
        raise typer.BadParameter(str(exc)) from None
    execute(config, resume=run.resume is not None, progress=run.progress, auth=providers)


def _resume_config(run_dir: Path, env: str | None, *, concurrency: int | None, base_url: list[str] | None) -> RunConfig:
    try:
        with Run(run_dir) as run:
            config = run.run_meta.config
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--resume") from None
    if config is None:
        raise typer.BadParameter(
            f"{run_dir} was stopped while it was being created and holds no rollouts; "
            "start it again with the same command, without --resume",
            param_hint="--resume",
        )
    stored = RunConfig.from_meta(config)
    if env is not None and stored.mix is not None:
        raise typer.BadParameter(
            f"{run_dir} is a mixture of {stored.env}; resume continues it as it was: give no ENV",
            param_hint="ENV",
        )
    if env is not None and env != stored.env:
        raise typer.BadParameter(
            f"{run_dir} was run with ENV {stored.env!r}, not {env!r}; resume continues the stored run as it was",
            param_hint="ENV",
        )
    return replace(
        stored,
        run_dir=run_dir,
        concurrency=concurrency if concurrency is not None else stored.concurrency,
        base_url=tuple(base_url) if base_url else stored.base_url,
    )


def execute(config: RunConfig, *, resume: bool, progress: bool, auth: dict[str, ModelAuth] | None = None) -> None:
    """Run ``config``, with ``auth`` bound for the env's ``InjectedAuth`` names (``--auth``)."""
    from benchmax.cli._progress import LiveProgress, install_log_handler
    from benchmax.cli._summary import render_provenance, render_summary, render_verdict

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    assert config.run_dir is not None
    if config.api_key_env and config.api_key_env not in os.environ:
        console.print(error_line(f"--api-key-env {config.api_key_env}: that environment variable is not set"))
        raise typer.Exit(2)
    urls = config.base_urls
    if config.base_url == EMBEDDED:
        target = "the embedded SmolLM2-135M model"
    else:
        target = ", ".join(map(redact_url, urls)) + (f" ({len(urls)} replicas)" if len(urls) > 1 else "")
    embedded = config.base_url == EMBEDDED
    starting = "starting the model" if embedded else None
    live = LiveProgress(console, replicas=() if embedded else urls, starting=starting) if progress else None
    started: list[LiveProgress] = []

    def announce() -> None:
        """The banner and the progress block, once the env and its data are known to be good."""
        console.print(f"[bold]benchmax eval[/] {redact_url(config.env)} -> {target}", highlight=False)
        console.print(f"run: {config.run_dir}", soft_wrap=True, highlight=False)
        if live is not None:
            started.append(live.__enter__())

    resume_hint = command_line("benchmax", "eval", "--resume", config.run_dir)
    try:
        with install_log_handler(console), bind_model_auth(auth or {}):
            try:
                result = asyncio.run(arun(config, observer=live, resume=resume, on_ready=announce))
            finally:
                for block in started:
                    block.__exit__(None, None, None)
            if started:
                console.print()
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted[/]: finished groups are stored in {config.run_dir}. Resume with:")
        console.print(f"  {resume_hint}", soft_wrap=True, highlight=False, markup=False)
        raise typer.Exit(130) from None
    except asyncio.CancelledError:
        console.print("\n[yellow]stopped[/] (SIGTERM). Resume with:")
        console.print(f"  {resume_hint}", soft_wrap=True, highlight=False, markup=False)
        raise typer.Exit(143) from None
    except RunStopped as exc:
        console.print(error_line(f"the run stopped: {exc}"))
        console.print(exc.hint, soft_wrap=True, highlight=False, markup=False)
        command = command_line("benchmax", "eval", "--resume", config.run_dir, *exc.resume_options)
        console.print(f"  {command}", soft_wrap=True, highlight=False, markup=False)
        raise typer.Exit(1) from None
    except EndpointError as exc:
        console.print(error_line(str(exc)))
        console.print("no rollout was run")
        raise typer.Exit(1) from None
    except BenchmaxError as exc:
        console.print(error_line(str(exc)))
        raise typer.Exit(2) from None
    render_summary(console, result.stats, client_stats=result.client_stats, outages=result.outages, cost=result.cost)
    with Run(result.run_dir) as run:
        render_provenance(console, run.run_meta.provenance)
    console.print(
        f"stored in {result.run_dir}; browse it with: {command_line('benchmax', 'inspect', result.run_dir)}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
    render_verdict(console, result.verdict)
    if not result.verdict.ok:
        raise typer.Exit(result.verdict.exit_code)
