"""``benchmax validate``, ``init`` and ``list``: checking an env, starting a new one, and the installed ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import bind_model_auth
from benchmax.cli._mix import MixEnvs, mix_spec
from benchmax.cli._options import ENV_HELP, EnvOptions, with_option_groups
from benchmax.cli._output import command_line, error_line
from benchmax.cli._scaffold import Names, test_command, write_directory, write_package
from benchmax.loading import EnvSpec, installed_envs
from benchmax.runner import MemberReport, Report, validate_env, validate_mix

console = Console()

EnvsArgument = Annotated[
    list[str] | None,
    typer.Argument(metavar="ENV", help=ENV_HELP + " Several ENVs: each env of the mixture is checked.",
                   show_default=False),
]  # fmt: skip


@with_option_groups
def validate_command(
    envs: EnvsArgument = None,
    mix_env: MixEnvs = [],  # noqa: B006 (Typer's default for a repeatable option; never mutated)
    env_options: EnvOptions = EnvOptions(),
    max_examples: Annotated[int, typer.Option(min=1, help="Examples checked per split.")] = 5,
    call_tools: Annotated[
        bool,
        typer.Option(
            "--call-tools/--no-call-tools",
            help="Call each declared tool once with placeholder arguments its schema accepts (a tool that raises "
            "would end every rollout that calls it); --no-call-tools for tools with side effects.",
        ),
    ] = True,
    base_url: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Also run one group against this endpoint.", rich_help_panel="Model endpoint"),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            metavar="NAME", help="Model name for the group run against --base-url.", rich_help_panel="Model endpoint"
        ),
    ] = "default",
    api_key_env: Annotated[
        str | None,
        typer.Option(
            metavar="VAR",
            help="Environment variable holding the API key for --base-url.",
            rich_help_panel="Model endpoint",
        ),
    ] = None,
) -> None:
    """Check an env (or each env of a mixture): it loads, both splits build, payloads and tool schemas are valid.

    Every problem is printed once, at its FILE:LINE; a mixture's under its env's name.
    Exit status: 0 valid; 1 the env (or an env of the mixture) has problems (one that
    does not even import among them); 2 the command line is wrong (ENV names no file,
    module or installed env; an unknown option, a bad --env-arg or --auth).
    """
    mix = mix_spec(
        envs or [], mix_env, env_args=env_options.env_arg, max_examples=None, env_max_examples=[], seed=None,
        data_dirs=env_options.data_dirs,
    )  # fmt: skip
    if mix is None and not envs:
        raise typer.BadParameter("give ENV (or several, or --env)", param_hint="ENV")
    with bind_model_auth(env_options.providers()):
        if mix is None:
            assert envs is not None
            spec = EnvSpec(envs[0], env_options.kwargs())
            report = asyncio.run(
                validate_env(
                    spec, data_dir=env_options.data_dir, max_examples=max_examples, base_url=base_url, model=model,
                    api_key_env=api_key_env, call_tools=call_tools,
                )
            )  # fmt: skip
            members = (MemberReport(spec.spec, spec.spec, report),)
        else:
            members = asyncio.run(
                validate_mix(
                    mix, max_examples=max_examples, base_url=base_url, model=model, api_key_env=api_key_env,
                    call_tools=call_tools,
                )
            )  # fmt: skip
    for member in members:
        if mix is not None:
            header = f"[bold]env {escape(member.name)}[/] ({escape(member.spec)})"
            console.print(header, highlight=False, soft_wrap=True)
        _print_report(member.report)
    failed = [member for member in members if not member.report.ok]
    if mix is not None:
        for member in members:
            count = len(member.report.problems)
            verdict = "[bold green]valid[/]" if not count else f"[red]{count} problem{'' if count == 1 else 's'}[/]"
            console.print(f"env {escape(member.name)}: {verdict}", highlight=False)
    if failed:
        count = sum(len(member.report.problems) for member in failed)
        envs_part = f" in {len(failed)} of {len(members)} envs" if mix is not None else ""
        console.print(f"{count} problem{'' if count == 1 else 's'} found{envs_part}")
        # 2: an ENV names nothing to check, a usage error
        raise typer.Exit(2 if any(not member.report.found for member in failed) else 1)
    console.print("[bold green]valid[/]")


def _print_report(report: Report) -> None:
    for note in report.notes:
        console.print(f"[green]ok[/] {escape(note)}", highlight=False, soft_wrap=True)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for problem in report.problems:
        console.print(error_line(f"{problem.where}: {problem.message}"), highlight=False, soft_wrap=True)


def init_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Directory (and env name) to create.")],
    package: Annotated[
        bool,
        typer.Option(
            "--package",
            help="An installable package (pyproject.toml with a benchmax.envs entry point, src/, tests/): "
            "pip install -e NAME, then run it by name.",
        ),
    ] = False,
) -> None:
    """Scaffold a new env: env.py in the seed's shape, a tiny dataset, a test (or, with --package, a package)."""
    target = Path(name)
    if target.exists() and any(target.iterdir()):
        console.print(f"[red]error[/] {target} exists and is not empty; pick a new name")
        raise typer.Exit(1)
    names = Names.of(target)
    if package:
        written = write_package(names)
        console.print(f"created {target}/ with {', '.join(written)}", highlight=False)
        console.print(
            f"next: {command_line('pip', 'install', '-e', target)} && "
            f"{command_line('benchmax', 'validate', names.name)}",
            highlight=False,
            markup=False,
        )
        return
    written = write_directory(names)
    console.print(f"created {target}/ with {', '.join(written)}", highlight=False)
    console.print(
        f"next: {command_line('benchmax', 'validate', target)} && {test_command(target)}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per env, for scripts.")] = False,
) -> None:
    """List installed env packages (their benchmax.envs entry points): name, version, description.

    Reads package metadata and each env's source file without importing it, so a
    broken env still shows; benchmax validate NAME imports and checks one.
    """
    envs = installed_envs()
    twice = {env.name for env in envs if sum(other.name == env.name for other in envs) > 1}
    if as_json:
        for env in envs:
            record = {
                "name": env.name,
                "version": env.version,
                "distribution": env.distribution,
                "entry_point": env.value,
                "description": env.description(),
                "duplicate": env.name in twice,
            }
            typer.echo(json.dumps(record))
        return
    if not envs:
        console.print(
            "no env packages are installed; make one with: benchmax init NAME --package, then pip install -e NAME",
            highlight=False,
        )
        return
    table = Table(title="installed envs", title_justify="left")
    for column in ("name", "version", "distribution", "description"):
        table.add_column(column)
    for env in envs:
        note = " [yellow](declared by more than one distribution: keep one)[/]" if env.name in twice else ""
        table.add_row(
            escape(env.name), escape(env.version or "?"), escape(env.distribution or "?"),
            escape(env.description()) + note,
        )  # fmt: skip
    console.print(table)
