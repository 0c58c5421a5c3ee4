"""The arguments every env command shares: what names an env, how its constructor gets kwargs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

ENV_HELP = (
    "path/to/env.py\\[:Class], a directory holding env.py, package.module:Class, an installed env, "
    "or http(s)://HOST:PORT (an env served by benchmax serve)."
)

EnvArgument = Annotated[str, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
OptionalEnvArgument = Annotated[str | None, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
EnvArgs = Annotated[
    list[str], typer.Option("--env-arg", metavar="KEY=VALUE", help="Constructor kwarg key=value (JSON value).")
]
DataDir = Annotated[Path | None, typer.Option(help="base_dir for create_dataset (default: the env's directory).")]


def parse_env_args(values: list[str], *, flag: str = "--env-arg") -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse as JSON, strings otherwise."""
    kwargs: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"{item!r}: use key=value with a Python identifier key", param_hint=flag)
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs
