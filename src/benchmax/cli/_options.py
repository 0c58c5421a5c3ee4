"""The arguments every env command shares: what names an env, how its constructor gets kwargs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmax.auth import AUTH_FLAG_FORM, EnvironmentKeyAuth, ModelAuthError, parse_auth_binding

ENV_HELP = (
    "path/to/env.py\\[:Class], a directory holding env.py, package.module:Class, an installed env, "
    "or http(s)://HOST:PORT (an env served by benchmax serve)."
)

EnvArgument = Annotated[str, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
OptionalEnvArgument = Annotated[str | None, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
EnvArgs = Annotated[
    list[str], typer.Option("--env-arg", metavar="KEY=VALUE", help="Constructor kwarg key=value (JSON value).")
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        help="base_dir for create_dataset (default: the env's directory, else its data/ folder, as 0.2.x envs keep it)."
    ),
]
AuthBindings = Annotated[
    list[str],
    typer.Option(
        "--auth",
        metavar=AUTH_FLAG_FORM,
        help=(
            "Bind the credential the env asks for as InjectedAuth(NAME) (e.g. a RagEnv's judge or embedding): "
            "a bearer key read from the variable BENCHMAX_AUTH_<NAME>_KEY (or VAR), sent only to URL and paths "
            "under it. Repeat for each name. The key is never stored or printed."
        ),
        show_default=False,
    ),
]


def parse_auth(values: list[str]) -> dict[str, EnvironmentKeyAuth]:
    """``--auth`` values as the providers to bind; a bad value or an unset variable is a usage error (exit 2)."""
    providers: dict[str, EnvironmentKeyAuth] = {}
    for value in values:
        try:
            name, provider = parse_auth_binding(value)
        except ModelAuthError as exc:
            raise typer.BadParameter(str(exc), param_hint="--auth") from None
        if name in providers:
            raise typer.BadParameter(f"{name!r} is bound twice; give each name once", param_hint="--auth")
        providers[name] = provider
    return providers


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
