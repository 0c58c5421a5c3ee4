"""The ``benchmax`` command line."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from benchmax import __version__
from benchmax.cli._env import init_command, list_command, validate_command
from benchmax.cli._eval import eval_command
from benchmax.cli._help import Command, Group
from benchmax.cli._import import import_command
from benchmax.cli._runs import diff_command, export_command, rescore_command

app = typer.Typer(
    name="benchmax",
    cls=Group,
    help="Run RL environments for LLMs: eval, keep and inspect rollouts, train.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # -h as every shell tool takes it; pages as wide as the terminal up to 100 columns, then wrapped.
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"benchmax {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, expose_value=False, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run RL environments for LLMs: eval, keep and inspect rollouts, train."""


app.command("eval", cls=Command)(eval_command)
app.command("validate", cls=Command)(validate_command)
app.command("init", cls=Command)(init_command)
app.command("list", cls=Command)(list_command)
app.command("export", cls=Command)(export_command)
app.command("rescore", cls=Command)(rescore_command)
app.command("diff", cls=Command)(diff_command)
app.command("import", cls=Command)(import_command)


def _register_optional() -> None:
    """Faces whose extras may be missing still show in --help and explain what to install."""
    try:
        from benchmax.cli._inspect import inspect_command
    except ImportError:
        pass
    else:
        app.command("inspect", cls=Command)(inspect_command)
    try:
        from benchmax.cli._serve import serve_command
    except ImportError:
        pass
    else:
        app.command("serve", cls=Command)(serve_command)
    try:
        from benchmax.cli._train import train_command
    except ImportError:
        pass
    else:
        app.command("train", cls=Command)(train_command)


_register_optional()


def main() -> None:
    sys.exit(app())
