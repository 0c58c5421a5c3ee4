"""``benchmax eval``: run an env against a model, keep every rollout, print a summary.

Exit codes: 0 the run did its job; 1 it did not (no rollout could be scored,
operational failures above ``--max-failure-rate``, the model endpoint could not
serve, or an outage outlasted ``--max-outage``); 2 bad usage, env or data (a
``--model`` the server does not serve among them);
130 Ctrl-C; 143 SIGTERM. Interrupted and stopped runs print the resume command.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from benchmax.auth import ModelAuth, bind_model_auth, redact_url
from benchmax.cli._options import AuthBindings, DataDir, EnvArgs, OptionalEnvArgument, parse_auth, parse_env_args
from benchmax.cli._output import command_line, error_line
from benchmax.client import DEFAULT_MAX_BYTES, PRICES_ENV, CacheSettings
from benchmax.engine import EngineConfig
from benchmax.envs import SamplingParams
from benchmax.errors import BenchmaxError
from benchmax.runner import (
    DEFAULT_MAX_FAILURE_RATE,
    EMBEDDED,
    EndpointError,
    RunConfig,
    RunStopped,
    arun,
)
from benchmax.store import Run

console = Console(stderr=False)

_DEFAULT_ENGINE = EngineConfig()


def eval_command(
    env: OptionalEnvArgument = None,
    env_arg: EnvArgs = [],  # noqa: B006
    data_dir: DataDir = None,
    auth: AuthBindings = [],  # noqa: B006
    split: Annotated[Literal["train", "eval"], typer.Option(help="Which dataset split to run.")] = "eval",
    max_examples: Annotated[int | None, typer.Option(min=1, help="Use at most N examples.")] = None,
    group_size: Annotated[int, typer.Option(min=1, help="Rollouts per example (siblings).")] = 1,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Rollouts in flight at once \\[default: 64; on --resume: the stored value]."),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Rollouts per zero-fill batch (a multiple of --group-size; default: the whole run)."),
    ] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: the server's).")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Tokens per model turn (default: the server's).")
    ] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling top_p (default: the server's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sibling k gets seed + k.")] = None,
    extra_body: Annotated[str | None, typer.Option(help="JSON object merged into every request body.")] = None,
    base_url: Annotated[
        list[str] | None,
        typer.Option(
            help="OpenAI-compatible endpoint (…/v1); give it again for each replica of the model (requests are "
            "spread over them); omit to run the embedded SmolLM2 model.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model name sent to the server (default: the one model the server lists at /models)."),
    ] = None,
    model_check: Annotated[
        bool,
        typer.Option(
            "--model-check/--no-model-check",
            help="Refuse a --model the server's /models does not list (aliases of listed names pass: see "
            "docs/reliability.md); --no-model-check for a gateway whose list is partial.",
        ),
    ] = True,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the API key.")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Where to keep the run (default: runs/NAME-TIME).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the run kept in this directory.")] = None,
    pass_threshold: Annotated[float, typer.Option(help="A rollout passes when its total reward reaches this.")] = 1.0,
    max_failure_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of rollouts that may fail operationally before the run counts as failed (exit 1).",
        ),
    ] = DEFAULT_MAX_FAILURE_RATE,
    request_timeout: Annotated[float, typer.Option(min=0.001, help="Seconds per model request.")] = 600.0,
    tool_timeout: Annotated[float, typer.Option(min=0.001, help="Seconds per tool call.")] = 300.0,
    rollout_timeout: Annotated[
        float | None, typer.Option(min=0.001, help="Seconds per rollout (waits for a down endpoint do not count).")
    ] = None,
    max_outage: Annotated[
        float,
        typer.Option(
            min=0.001,
            help="Seconds a model endpoint (every replica, with several) may stay down while its rollouts wait; "
            "past it the run stops, resumable.",
        ),
    ] = _DEFAULT_ENGINE.max_outage,
    max_requests: Annotated[
        int,
        typer.Option(
            min=1,
            help="Model requests in flight per endpoint, shared by all rollouts (at most: fewer while this "
            "process's event loop is saturated and more would only wait for it).",
        ),
    ] = _DEFAULT_ENGINE.max_concurrent_requests,
    max_content_chars: Annotated[
        int, typer.Option(min=1, help="Model text kept and sent back per message (longer is cut, marked).")
    ] = _DEFAULT_ENGINE.max_content_chars,
    max_tool_result_chars: Annotated[
        int, typer.Option(min=1, help="Tool result text kept and sent per call (longer is cut, marked).")
    ] = _DEFAULT_ENGINE.max_tool_result_chars,
    executor: Annotated[Literal["local", "ray"], typer.Option(help="Where groups run.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="auto or ray://host:port (with --executor ray).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Ray actors (with --executor ray).")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show live progress.")] = True,
    cache: Annotated[
        str | None,
        typer.Option(
            metavar="DIR|off",
            help="Answer repeated model requests from a response cache in DIR (off unless given: see "
            "docs/cost-and-cache.md) \\[on --resume: the stored choice].",
            show_default=False,
        ),
    ] = None,
    cache_judge: Annotated[
        bool, typer.Option("--cache-judge/--no-cache-judge", help="With --cache: also cache LLM-judge calls.")
    ] = True,
    cache_unseeded: Annotated[
        Literal["per-rollout", "skip"],
        typer.Option(
            help="With --cache: requests that sample without a seed are cached per rollout (a re-run replays "
            "each rollout's own draw) or never (skip)."
        ),
    ] = "per-rollout",
    cache_max_mb: Annotated[
        int, typer.Option(min=1, help="With --cache: MB of stored replies kept; the least recently used go first.")
    ] = DEFAULT_MAX_BYTES // 2**20,
    prices: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help=f"A price table (TOML, USD per 1M tokens) over the shipped one (default: ${PRICES_ENV}).",
            show_default=False,
        ),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            help="Stop the run (resumable) once its model calls cost this many US dollars.",
        ),
    ] = None,
) -> None:
    """Run ENV against a model; every rollout is stored as it finishes."""
    if max_cost is not None and not max_cost > 0:
        raise typer.BadParameter(f"{max_cost:g} is not a budget: give US dollars above 0", param_hint="--max-cost")
    chosen_cache = cache_settings(cache, judge=cache_judge, unseeded=cache_unseeded, max_mb=cache_max_mb)
    providers = parse_auth(auth)
    try:
        if resume is not None:
            config = _resume_config(resume, env, concurrency=concurrency, base_url=base_url)
            config = replace(
                config,
                cache=chosen_cache if cache is not None else config.cache,
                prices=str(prices) if prices is not None else config.prices,
                max_cost=max_cost if max_cost is not None else config.max_cost,
            )
        else:
            if env is None:
                raise typer.BadParameter("give ENV (or --resume RUN_DIR)", param_hint="ENV")
            try:
                body = json.loads(extra_body) if extra_body else {}
            except json.JSONDecodeError as exc:
                raise typer.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
            if not isinstance(body, dict):
                raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
            if batch_size is not None and batch_size % group_size:
                raise typer.BadParameter(
                    f"{batch_size} is not a multiple of --group-size {group_size}: "
                    "groups are never split across batches",
                    param_hint="--batch-size",
                )
            config = RunConfig(
                env=env,
                env_kwargs=parse_env_args(env_arg),
                data_dir=data_dir,
                split=split,  # type: ignore[arg-type]
                max_examples=max_examples,
                group_size=group_size,
                concurrency=concurrency if concurrency is not None else 64,
                batch_size=batch_size,
                model=model,
                check_model=model_check,
                base_url=tuple(base_url) if base_url else EMBEDDED,
                api_key_env=api_key_env,
                sampling=SamplingParams(
                    temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, extra_body=body
                ),
                run_dir=run_dir,
                pass_threshold=pass_threshold,
                max_failure_rate=max_failure_rate,
                engine=EngineConfig(
                    request_timeout=request_timeout,
                    tool_timeout=tool_timeout,
                    rollout_timeout=rollout_timeout,
                    max_concurrent_requests=max_requests,
                    max_content_chars=max_content_chars,
                    max_tool_result_chars=max_tool_result_chars,
                    max_outage=max_outage,
                ),
                executor=executor,
                ray_address=ray_address,
                workers=workers,
                cache=chosen_cache,
                prices=str(prices) if prices is not None else None,
                max_cost=max_cost,
            ).with_run_dir()
    except ValueError as exc:  # RunConfig's checks (replicas, credentials): the message names the option
        raise typer.BadParameter(str(exc)) from None
    execute(config, resume=resume is not None, progress=progress, auth=providers)


def cache_settings(
    value: str | None,
    *,
    judge: bool = True,
    unseeded: str = "per-rollout",
    max_mb: int = DEFAULT_MAX_BYTES // 2**20,
) -> CacheSettings | None:
    """``--cache DIR`` (``off``, or not given: no cache)."""
    if value is None or value.strip().lower() == "off":
        return None
    if not value.strip():
        raise typer.BadParameter("give a directory, or off", param_hint="--cache")
    directory = Path(value).expanduser()
    if directory.exists() and not directory.is_dir():
        raise typer.BadParameter(f"{directory} is a file; give a directory for the cache", param_hint="--cache")
    return CacheSettings(directory, max_bytes=max_mb * 2**20, judge=judge, unseeded=unseeded)  # type: ignore[arg-type]


def _resume_config(
    run_dir: Path, env: str | None, *, concurrency: int | None, base_url: list[str] | None
) -> RunConfig:
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


def execute(
    config: RunConfig, *, resume: bool, progress: bool, auth: dict[str, ModelAuth] | None = None
) -> None:
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
    console.print(f"[bold]benchmax eval[/] {redact_url(config.env)} -> {target}", highlight=False)
    console.print(f"run: {config.run_dir}", soft_wrap=True, highlight=False)
    resume_hint = command_line("benchmax", "eval", "--resume", config.run_dir)
    try:
        with install_log_handler(console), bind_model_auth(auth or {}):
            if progress:
                with LiveProgress(console, replicas=() if config.base_url == EMBEDDED else urls) as live:
                    result = asyncio.run(arun(config, observer=live, resume=resume))
                console.print()
            else:
                result = asyncio.run(arun(config, resume=resume))
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
    render_summary(
        console, result.stats, client_stats=result.client_stats, outages=result.outages, cost=result.cost
    )
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
