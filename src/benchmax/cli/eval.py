"""``benchmax eval``: run an env against a model, keep every rollout, print a summary."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from benchmax.engine.engine import EngineConfig
from benchmax.envs.errors import DatasetError, EnvDefinitionError
from benchmax.envs.rollout import SamplingParams
from benchmax.runner.config import EMBEDDED, RunConfig
from benchmax.runner.env_spec import EnvSpecError
from benchmax.runner.run import arun
from benchmax.store.reader import Run
from benchmax.store.writer import StoreError

console = Console(stderr=False)


def parse_env_args(values: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse as JSON, strings otherwise."""
    kwargs: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"{item!r}: use key=value with a Python identifier key", param_hint="--env-arg")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


def eval_command(
    env: Annotated[
        str | None,
        typer.Argument(help="path/to/file.py:Class, package.module:Class or an examples directory."),
    ] = None,
    env_arg: Annotated[list[str], typer.Option("--env-arg", help="Constructor kwarg key=value (JSON value).")] = [],  # noqa: B006
    data_dir: Annotated[
        Path | None, typer.Option(help="base_dir for create_dataset (default: the env's directory).")
    ] = None,
    split: Annotated[str, typer.Option(help="train or eval.")] = "eval",
    max_examples: Annotated[int | None, typer.Option(help="Use at most N examples.")] = None,
    group_size: Annotated[int, typer.Option(help="Rollouts per example (siblings).")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(help="Rollouts in flight at once [default: 64; on --resume: the stored value].")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Rollouts per zero-fill batch (multiple of group size; default: whole run).")
    ] = None,
    temperature: Annotated[float | None, typer.Option()] = None,
    max_tokens: Annotated[int | None, typer.Option()] = None,
    top_p: Annotated[float | None, typer.Option()] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sibling k gets seed + k.")] = None,
    extra_body: Annotated[str | None, typer.Option(help="JSON object merged into every request body.")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint; omit to run the embedded SmolLM2 model.")
    ] = None,
    model: Annotated[str, typer.Option(help="Model name sent to the server.")] = "default",
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the API key.")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Where to keep the run (default: runs/NAME-TIME).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the run kept in this directory.")] = None,
    pass_threshold: Annotated[float, typer.Option(help="A rollout passes when its total reward reaches this.")] = 1.0,
    request_timeout: Annotated[float, typer.Option(help="Seconds per model request.")] = 600.0,
    tool_timeout: Annotated[float, typer.Option(help="Seconds per tool call.")] = 300.0,
    rollout_timeout: Annotated[float | None, typer.Option(help="Seconds per rollout.")] = None,
    max_requests: Annotated[
        int, typer.Option(help="Model requests in flight per endpoint, shared by all rollouts.")
    ] = EngineConfig().max_concurrent_requests,
    max_content_chars: Annotated[
        int, typer.Option(min=1, help="Model text kept and sent back per message (longer is cut, marked).")
    ] = EngineConfig().max_content_chars,
    max_tool_result_chars: Annotated[
        int, typer.Option(min=1, help="Tool result text kept and sent per call (longer is cut, marked).")
    ] = EngineConfig().max_tool_result_chars,
    executor: Annotated[str, typer.Option(help="local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="auto or ray://host:port (with --executor ray).")] = None,
    workers: Annotated[int | None, typer.Option(help="Ray actors (with --executor ray).")] = None,
    progress: Annotated[bool, typer.Option(help="Show live progress.")] = True,
) -> None:
    """Run ENV against a model; every rollout is stored as it finishes."""
    if resume is not None:
        config = _resume_config(resume, env, concurrency=concurrency, base_url=base_url)
    else:
        if env is None:
            raise typer.BadParameter("give ENV (or --resume RUN_DIR)", param_hint="ENV")
        try:
            body = json.loads(extra_body) if extra_body else {}
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
        if not isinstance(body, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
        try:
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
                base_url=base_url or EMBEDDED,
                api_key_env=api_key_env,
                sampling=SamplingParams(
                    temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, extra_body=body
                ),
                run_dir=run_dir,
                pass_threshold=pass_threshold,
                engine=EngineConfig(
                    request_timeout=request_timeout,
                    tool_timeout=tool_timeout,
                    rollout_timeout=rollout_timeout,
                    max_concurrent_requests=max_requests,
                    max_content_chars=max_content_chars,
                    max_tool_result_chars=max_tool_result_chars,
                ),
                executor=executor,
                ray_address=ray_address,
                workers=workers,
            ).with_run_dir()
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    execute(config, resume=resume is not None, progress=progress)


def _resume_config(
    run_dir: Path, env: str | None, *, concurrency: int | None, base_url: str | None
) -> RunConfig:
    try:
        with Run(run_dir) as run:
            stored = RunConfig.from_meta(run.meta["config"])
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--resume") from None
    except KeyError:
        raise typer.BadParameter(
            f"{run_dir} was stopped while it was being created and holds no rollouts; "
            "start it again with the same command, without --resume",
            param_hint="--resume",
        ) from None
    if env is not None and env != stored.env:
        raise typer.BadParameter(
            f"{run_dir} was run with ENV {stored.env!r}, not {env!r}; resume continues the stored run as it was",
            param_hint="ENV",
        )
    from dataclasses import replace

    return replace(
        stored,
        run_dir=run_dir,
        concurrency=concurrency if concurrency is not None else stored.concurrency,
        base_url=base_url or stored.base_url,
    )


def execute(config: RunConfig, *, resume: bool, progress: bool) -> None:
    from benchmax.cli.progress import LiveProgress
    from benchmax.cli.summary import render_summary

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    assert config.run_dir is not None
    if config.api_key_env and config.api_key_env not in os.environ:
        console.print(f"[red]error:[/] --api-key-env {config.api_key_env}: that environment variable is not set")
        raise typer.Exit(2)
    target = "the embedded SmolLM2-135M model" if config.base_url == EMBEDDED else config.base_url
    console.print(f"[bold]benchmax eval[/] {config.env} -> {target}  (run: {config.run_dir})")
    try:
        if progress:
            with LiveProgress(console) as live:
                result = asyncio.run(arun(config, observer=live, resume=resume))
            console.print()
        else:
            result = asyncio.run(arun(config, resume=resume))
    except KeyboardInterrupt:
        console.print(
            f"\n[yellow]interrupted[/]: finished groups are stored in {config.run_dir}. "
            f"Resume with:\n  benchmax eval --resume {config.run_dir}"
        )
        raise typer.Exit(130) from None
    except asyncio.CancelledError:
        console.print(f"\n[yellow]stopped[/]. Resume with:\n  benchmax eval --resume {config.run_dir}")
        raise typer.Exit(143) from None
    except (StoreError, EnvSpecError, EnvDefinitionError, DatasetError) as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    render_summary(console, result.stats, client_stats=result.client_stats)
    console.print(f"stored in {result.run_dir}; browse it with: benchmax inspect {result.run_dir}")
