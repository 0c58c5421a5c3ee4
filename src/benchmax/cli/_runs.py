"""Commands over stored runs: ``export``, ``rescore`` and ``diff``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from benchmax.cli._output import command_line, error_line
from benchmax.errors import BenchmaxError
from benchmax.runner import arescore
from benchmax.store import Run, diff_runs, export_run

console = Console()


def _open(path: Path) -> Run:
    try:
        return Run(path)
    except FileNotFoundError as exc:
        console.print(error_line(str(exc)))
        raise typer.Exit(2) from None


def export_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
    format: Annotated[str, typer.Option("--format", help="jsonl or parquet.")] = "jsonl",
    output: Annotated[Path | None, typer.Option(help="Output file (default: RUN_DIR/rollouts.FORMAT).")] = None,
) -> None:
    """Write every rollout (transcript, rewards raw and filled, mask, logs) to a file."""
    with _open(run_dir) as run:
        target = output or run_dir / f"rollouts.{format}"
        try:
            count = export_run(run, target, format)
        except (ValueError, RuntimeError) as exc:
            console.print(error_line(str(exc)))
            raise typer.Exit(2) from None
    console.print(f"wrote {count} rollouts to {target}")


def rescore_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="The run whose transcripts to score again.")],
    env: Annotated[str | None, typer.Argument(metavar="ENV", help="Env spec (default: the one the run used).")] = None,
    output: Annotated[Path | None, typer.Option("--run-dir", help="Where to write the new run.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Processes scoring in parallel [default: one per core (up to 8) for big runs]."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Groups scored at once in all (bounds a judge's calls in flight).")
    ] = 64,
) -> None:
    """Score stored transcripts with the env's current reward code, into a new run (no model calls)."""
    from benchmax.cli._summary import render_summary

    _open(run_dir).close()
    try:
        target = asyncio.run(
            arescore(run_dir, env_spec=env, run_dir=output, workers=workers, concurrency=concurrency)
        )
    except BenchmaxError as exc:
        console.print(error_line(str(exc)), highlight=False)
        raise typer.Exit(2) from None
    with Run(target) as run:
        render_summary(console, run.stats())
    console.print(
        f"rescored run stored in {target}; compare with: {command_line('benchmax', 'diff', run_dir, target)}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )


def diff_command(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="Baseline run.")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="Run to compare against the baseline.")],
    examples: Annotated[int, typer.Option(help="Example rows to show (largest changes first).")] = 20,
) -> None:
    """Per-component and per-example reward deltas, B minus A."""
    with _open(run_a) as a, _open(run_b) as b:
        result = diff_runs(a, b)
    table = Table(title="components (B - A)", title_justify="left")
    for column in ("component", "A", "B", "delta"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for delta in result.components:
        table.add_row(delta.component, _fmt(delta.mean_a), _fmt(delta.mean_b), _fmt(delta.delta, signed=True))
    console.print(table)
    changed = sorted((d for d in result.examples if d.delta), key=lambda d: (-abs(d.delta or 0), d.example_id or ""))
    per_example = Table(title=f"examples with the largest changes ({len(changed)} changed)", title_justify="left")
    for column in ("example", "component", "A", "B", "delta"):
        per_example.add_column(column, justify="right" if column in ("A", "B", "delta") else "left")
    for delta in changed[:examples]:
        per_example.add_row(
            delta.example_id or "",
            delta.component,
            _fmt(delta.mean_a),
            _fmt(delta.mean_b),
            _fmt(delta.delta, signed=True),
        )
    console.print(per_example)
    if result.only_in_a or result.only_in_b:
        console.print(f"examples only in A: {len(result.only_in_a)}, only in B: {len(result.only_in_b)}")


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"
