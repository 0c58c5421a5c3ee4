"""``benchmax serve``: the command the main Typer app registers.

Starlette, uvicorn and websockets load only when the command runs, so the rest
of the CLI works without the ``serve`` extra installed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from benchmax.cli._options import DataDir, EnvArgs, parse_env_args
from benchmax.errors import BenchmaxError

_SERVE_ENV_HELP = (
    "The env to serve: path/to/env.py\\[:Class], a directory holding env.py, package.module:Class, or an installed env."
)


def serve_command(
    env: Annotated[str, typer.Argument(metavar="ENV", help=_SERVE_ENV_HELP, show_default=False)],
    env_arg: EnvArgs = [],  # noqa: B006
    data_dir: DataDir = None,
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 picks a free one).")] = 8000,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to bind. Anything but loopback requires a token (one is generated if omitted)."
        ),
    ] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="BENCHMAX_SERVE_TOKEN",
            help="Require this bearer token on every request (clients read it from BENCHMAX_SERVE_TOKEN). "
            "Without it one is generated: on loopback it guards what runs env code and is kept in a file "
            "only you can read, where benchmax eval finds it.",
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="On loopback, let any program on this machine run the env's tools without a token.",
        ),
    ] = False,
    allow_origin: Annotated[
        list[str],
        typer.Option(
            "--allow-origin",
            help="A web page (scheme://host:port) that may call the server; pages elsewhere are refused. Repeatable.",
        ),
    ] = [],  # noqa: B006
    session_ttl: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds a session may stay idle before its rollout_context is exited."),
    ] = 300.0,
    max_sessions: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Sessions open at once; more are refused (HTTP 503). Default: what the free memory holds "
            "at 64 MiB a session, between 16 and 1024.",
            show_default=False,
        ),
    ] = None,
    max_sessions_per_client: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Sessions one client address may hold; more are refused (HTTP 429). Default: half of --max-sessions.",
            show_default=False,
        ),
    ] = None,
    max_request_bytes: Annotated[
        int, typer.Option(min=1024, help="The largest request body or WebSocket message accepted.")
    ] = 64 * 1024 * 1024,
) -> None:
    """Serve ENV over HTTP: benchmax eval http://HOST:PORT runs against it, and OpenEnv clients drive it."""
    try:
        from benchmax.serve import ServeConfig, serve
    except ImportError as exc:
        typer.echo(
            f"error: benchmax serve needs the serve extra ({exc.name} is missing): pip install 'benchmax[serve]'",
            err=True,
        )
        raise typer.Exit(2) from exc
    limits = {"max_sessions": max_sessions} if max_sessions is not None else {}
    config = ServeConfig(
        session_ttl=session_ttl,
        max_sessions_per_client=max_sessions_per_client,
        max_request_bytes=max_request_bytes,
        **limits,
    )
    try:
        serve(
            env,
            env_kwargs=parse_env_args(env_arg),
            data_dir=data_dir,
            host=host,
            port=port,
            token=token,
            require_token=not no_token,
            allowed_origins=allow_origin,
            config=config,
            announce=lambda line: typer.echo(line),
        )
    except BenchmaxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
