"""The end-of-run summary tables."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.client import Outage
from benchmax.runner import RunVerdict
from benchmax.store import RunStats

_MAX_EXAMPLE_ROWS = 15


def render_summary(
    console: Console, stats: RunStats, *, client_stats: dict | None = None, outages: Sequence[Outage] = ()
) -> None:
    components = Table(title="reward components (after zero-fill)", title_justify="left")
    for column in ("component", "mean", "std", "min", "max", "filled"):
        components.add_column(column, justify="left" if column == "component" else "right")
    for name, figures in stats.components.items():
        components.add_row(
            name,
            f"{figures.mean:.4f}",
            f"{figures.std:.4f}",
            f"{figures.min:.4g}",
            f"{figures.max:.4g}",
            str(figures.filled),
        )
    console.print(components)

    overview = Table(title="run", title_justify="left", show_header=False)
    overview.add_column("figure")
    overview.add_column("value", justify="right")
    overview.add_row("rollouts", f"{stats.rollouts} ({stats.scored} scored, {stats.failures} failed)")
    overview.add_row(
        f"pass rate (reward >= {stats.pass_threshold:g})", f"{stats.pass_rate:.1%} ({stats.passed}/{stats.rollouts})"
    )
    if stats.groups and stats.groups_single == stats.groups:
        signal = "n/a: one rollout per group (use --group-size 2 or more)"
    else:
        signal = f"{stats.groups_no_signal} of {stats.groups} (all siblings scored the same)"
    overview.add_row("groups without learning signal", signal)
    overview.add_row("latency p50 / p95", f"{stats.latency_p50:.2f}s / {stats.latency_p95:.2f}s")
    overview.add_row("tokens prompt / completion", f"{stats.prompt_tokens:,} / {stats.completion_tokens:,}")
    overview.add_row("wall time", f"{stats.wall_seconds:.1f}s")
    if client_stats and (client_stats.get("retries") or client_stats.get("failures")):
        retries = ", ".join(f"{cause}={count}" for cause, count in client_stats.get("retries", {}).items())
        overview.add_row("model requests / retries", f"{client_stats.get('requests', 0)} / {retries or 0}")
    endpoints = (client_stats or {}).get("endpoints") or {}
    if len(endpoints) > 1:
        total = sum(figures.get("requests", 0) for figures in endpoints.values()) or 1
        for url, figures in endpoints.items():
            requests = figures.get("requests", 0)
            retries = sum(figures.get("retries", {}).values())
            overview.add_row(
                "replica", f"{url}: {requests:,} requests ({requests / total:.0%}), {retries} retries"
            )
        if client_stats and client_stats.get("rerouted"):
            overview.add_row("requests rerouted", f"{client_stats['rerouted']} (their replica went down under them)")
    for outage in outages:
        since = time.strftime("%H:%M:%S", time.localtime(outage.started_at))
        length = f"at {since} for {outage.seconds:.1f}s" if outage.ended_at else f"since {since}, still down"
        held = f"{outage.held} requests held"
        if outage.rerouted:
            held += f", {outage.rerouted} rerouted"
        verdict = " (past --max-outage)" if outage.failed else ""
        overview.add_row("endpoint outage", f"{outage.endpoint} down {length}, {held}{verdict}")
    console.print(overview)

    reasons = Table(title="termination reasons", title_justify="left")
    reasons.add_column("reason")
    reasons.add_column("rollouts", justify="right")
    for reason, count in stats.reasons.items():
        style = "" if reason not in stats.errors else "red"
        reasons.add_row(f"[{style}]{reason}[/]" if style else reason, str(count))
    console.print(reasons)
    for reason, count in stats.errors.items():
        first = stats.first_errors.get(reason)
        if first:
            console.print(
                f"[red]{escape(reason)}[/] ({count}): first error: {escape(_one_line(first))}",
                soft_wrap=True,
                highlight=False,
            )

    examples = Table(
        title=f"pass rate per example (lowest {min(_MAX_EXAMPLE_ROWS, len(stats.examples))} of {stats.example_count})",
        title_justify="left",
    )
    examples.add_column("example")
    examples.add_column("passed", justify="right")
    examples.add_column("rate", justify="right")
    for example in stats.examples[:_MAX_EXAMPLE_ROWS]:
        examples.add_row(example.example_id, f"{example.passed}/{example.total}", f"{example.rate:.0%}")
    console.print(examples)


def render_verdict(console: Console, verdict: RunVerdict) -> None:
    """Say plainly when the run did not do its job (the exit code says it to scripts)."""
    if verdict.ok:
        return
    console.print(f"[bold red]run failed:[/] {escape(verdict.reason or '')}", soft_wrap=True, highlight=False)
    if verdict.first_error:
        console.print(
            f"  first {escape(verdict.dominant or '')} error: {escape(_one_line(verdict.first_error))}",
            soft_wrap=True,
            highlight=False,
        )


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"
