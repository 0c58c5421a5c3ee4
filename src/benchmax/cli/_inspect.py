"""``benchmax inspect``: the command the main Typer app registers.

Starlette and uvicorn load only when the command runs, so the rest of the CLI
works without the ``inspect`` extra installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from benchmax.errors import BenchmaxError


def inspect_command(
    path: Annotated[
        Path,
        typer.Argument(metavar="PATH", help="A run directory, or a folder of runs (default: ./runs)."),
    ] = Path("runs"),
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 picks a free one).")] = 8765,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind. A token is required on any address (one is generated if omitted).",
        ),
    ] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="BENCHMAX_INSPECT_TOKEN",
            help="Require this token on every request (sent as ?token=, then kept in a cookie); "
            "by default one is generated and printed in the link.",
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="Serve loopback clients without a token: any user of this machine may then read the runs.",
        ),
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option("--export", help="Write a static bundle of the pages to this folder and exit."),
    ] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser tab.")] = False,
) -> None:
    """Open the rollout inspector: runs, groups, rollouts, rewards and logs in a local web page."""
    try:
        from benchmax.inspector import export_static, serve
    except ImportError as exc:
        typer.echo(
            f"error: benchmax inspect needs the inspect extra ({exc.name} is missing): pip install 'benchmax[inspect]'",
            err=True,
        )
        raise typer.Exit(2) from exc
    if not path.exists():
        typer.echo(f"error: {path} does not exist: pass a run directory or a folder of runs", err=True)
        raise typer.Exit(2)
    try:
        if export is not None:
            index = export_static(path, export)
            typer.echo(f"wrote the inspector bundle: open {index}")
            return
        serve(path, host=host, port=port, token=token, open_browser=not no_browser, require_token=not no_token)
    except (BenchmaxError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
