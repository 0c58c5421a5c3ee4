"""The end-of-run summary tables."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from benchmax.cli._output import fit_table, plural
from benchmax.client import ROLES, Outage, calls_from_meta, merge_figures
from benchmax.runner import RunVerdict
from benchmax.store import DataDigest, EnvFigures, Provenance, RunStats, Sample

_MAX_EXAMPLE_ROWS = 15


def render_summary(
    console: Console,
    stats: RunStats,
    *,
    client_stats: dict | None = None,
    outages: Sequence[Outage] = (),
    cost: Mapping[str, Any] | None = None,
    imported: bool = False,
) -> None:
    """The end-of-run summary; ``imported``: the rollouts are recorded conversations (``benchmax import``),
    one per group by nature, so no tip about ``--group-size``."""
    if stats.several_envs:
        render_suite(console, stats.envs)  # a component's figures over the run would mix envs
    else:
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
    _render_turn_rewards(console, stats)

    overview = Table(title="run", title_justify="left", show_header=False)
    overview.add_column("figure")
    overview.add_column("value", justify="right")
    overview.add_row("rollouts", f"{stats.rollouts} ({stats.scored} scored, {stats.failures} failed)")
    overview.add_row(
        f"pass rate (reward >= {stats.pass_threshold:g})", f"{stats.pass_rate:.1%} ({stats.passed}/{stats.rollouts})"
    )
    if stats.groups and stats.groups_single == stats.groups:
        tip = "imported conversations" if imported else "use --group-size 2 or more"
        signal = f"n/a: one rollout per group ({tip})"
    else:
        signal = f"{stats.groups_no_signal} of {stats.groups} (all siblings scored the same)"
    overview.add_row("groups without learning signal", signal)
    overview.add_row("latency p50 / p95", f"{stats.latency_p50:.2f}s / {stats.latency_p95:.2f}s")
    overview.add_row("tokens prompt / completion", f"{stats.prompt_tokens:,} / {stats.completion_tokens:,}")
    overview.add_row("wall time", f"{stats.wall_seconds:.1f}s")
    for figure, value in cost_rows(cost):
        overview.add_row(figure, escape(value))
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
                "replica",
                f"{url}: {plural(requests, 'request')} ({requests / total:.0%}), {plural(retries, 'retry', 'retries')}",
            )
        if client_stats and client_stats.get("rerouted"):
            overview.add_row("requests rerouted", f"{client_stats['rerouted']} (their replica went down under them)")
    for outage in outages:
        since = time.strftime("%H:%M:%S", time.localtime(outage.started_at))
        length = f"at {since} for {outage.seconds:.1f}s" if outage.ended_at else f"since {since}, still down"
        held = f"{plural(outage.held, 'request')} held"
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

    render_examples(console, stats)
    render_samples(console, stats.samples)


def _render_turn_rewards(console: Console, stats: RunStats) -> None:
    """The rewards ``env_response`` gave turns, apart from the outcome's components (none: no table)."""
    if not stats.turn_rewards:
        return
    turns = Table(title="turn rewards (from env_response; not part of the outcome)", title_justify="left")
    for column in ("component", "mean per turn", "turns", "mean sum per rollout", "rollouts"):
        turns.add_column(column, justify="left" if column == "component" else "right")
    for name, figures in stats.turn_rewards.items():
        turns.add_row(
            escape(name),
            f"{figures.mean:.4f}",
            str(figures.turns),
            f"{figures.per_rollout:.4f}",
            str(figures.rollouts),
        )
    console.print(turns)


def render_suite(console: Console, envs: Sequence[EnvFigures]) -> None:
    """The suite table of a run of several envs: one row per env, its pass rate and each
    component's mean over that env's rollouts ("-": the env does not emit it).

    One row per env while that fits the console; else one row per env and figure, so a
    suite of many components still reads in 80 columns without cutting a name."""
    names = sorted({name for figures in envs for name in figures.components})
    title = "per env (components after zero-fill, within each env)"
    wide = Table(title=title, title_justify="left")
    for column in ("env", "rollouts", "failed", "pass rate", *names):
        wide.add_column(escape(column), justify="left" if column == "env" else "right", no_wrap=True)
    for figures in envs:
        wide.add_row(
            escape(str(figures.env)),
            f"{figures.rollouts:,}",
            f"{figures.failed:,}",
            f"{figures.pass_rate:.1%}",
            *(_mean(figures.components.get(name)) for name in names),
        )
    fit_table(console, wide, "")
    if sum(column.width or 0 for column in wide.columns) + 3 * len(wide.columns) + 1 <= console.width:
        console.print(wide)
        return
    long = Table(title=title, title_justify="left")
    long.add_column("env", overflow="fold")
    long.add_column("figure", overflow="fold")
    long.add_column("value", justify="right", no_wrap=True)
    for index, figures in enumerate(envs):
        if index:
            long.add_section()
        env = escape(str(figures.env))
        long.add_row(env, "rollouts (failed)", f"{figures.rollouts:,} ({figures.failed:,})")
        long.add_row("", "pass rate", f"{figures.pass_rate:.1%}")
        for name, mean in figures.components.items():
            long.add_row("", escape(name), _mean(mean))
    console.print(long)


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render_examples(console: Console, stats: RunStats) -> None:
    """The lowest pass rates per example, each example shown by its id and prompt excerpt."""
    if not stats.example_count:
        return
    if stats.every_example_passes:
        console.print(
            f"pass rate per example: every example passes ({plural(stats.example_count, 'example')}, "
            f"reward >= {stats.pass_threshold:g} on every rollout)",
            highlight=False,
        )
        return
    shown = min(_MAX_EXAMPLE_ROWS, len(stats.examples))
    examples = Table(title=f"pass rate per example (lowest {shown} of {stats.example_count})", title_justify="left")
    examples.add_column("example", no_wrap=True)
    examples.add_column("prompt")
    examples.add_column("passed", justify="right")
    examples.add_column("rate", justify="right")
    for example in stats.examples[:_MAX_EXAMPLE_ROWS]:
        examples.add_row(Text(example.label), Text(example.prompt), f"{example.passed}/{example.total}",
                         f"{example.rate:.0%}")  # fmt: skip
    console.print(fit_table(console, examples, "prompt"))


def render_samples(console: Console, samples: Sequence[Sample]) -> None:
    """A few rollouts read whole: the task (prompt, the example's fields) next to the answer.

    Every text is the store's one bounded line (images as ``[image WxH fmt]``),
    printed as plain text: nothing in it is read as markup.
    """
    if not samples:
        return
    console.print("samples", style="italic", highlight=False)
    tones = {"passed": "green", "not passed": "yellow", "failed": "red"}
    for sample in samples:
        reward = "-" if sample.reward is None else f"{sample.reward:.4g}"
        head = Text.assemble(
            "  ", (sample.outcome, tones.get(sample.outcome, "")), f"  reward {reward}  {sample.termination_reason}  ",
            (sample.label or sample.rollout_id, "dim"),
        )  # fmt: skip
        console.print(head, soft_wrap=True, highlight=False)
        lines = [("prompt", sample.prompt), ("fields", sample.fields)]
        if sample.outcome != "failed" or sample.answer:
            lines.append(("answer", sample.answer or "(empty)"))
        if sample.error:
            lines.append(("error", sample.error))
        for label, text in lines:
            if text:
                console.print(Text.assemble(f"    {label}: ", text), soft_wrap=True, highlight=False)


def cost_rows(cost: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The run's model calls, response-cache hits and cost (unknown, never 0, without a price), as stored."""
    figures = calls_from_meta(cost)
    if cost is None or not figures:
        return []
    by_role = {role: merge_figures([item for item in figures if item.role == role]) for role in ROLES}
    rows = []
    hits = sum(item.cache_hits for item in figures)
    misses = sum(item.cache_misses for item in figures)
    calls = []
    for role, items in by_role.items():
        if items:
            sent = sum(item.requests for item in items)
            cached = sum(item.cache_hits for item in items)
            calls.append(f"{role} {sent:,} sent" + (f" + {cached:,} from the cache" if hits or misses else ""))
    rows.append(("model calls", "; ".join(calls)))
    if hits or misses:
        rows.append(("response cache", f"{hits:,} hits, {misses:,} misses"))
    judge = by_role["judge"]
    if judge:
        prompt = sum(item.prompt_tokens for item in judge)
        completion = sum(item.completion_tokens for item in judge)
        rows.append(("judge tokens prompt / completion", f"{prompt:,} / {completion:,}"))
    cached_tokens = sum(item.cached_tokens for item in figures)
    if cached_tokens:
        rows.append(("prompt tokens the server cached", f"{cached_tokens:,}"))
    if cost.get("usd") is not None:
        parts = [f"{role} {usd(sum(item.usd or 0.0 for item in items))}" for role, items in by_role.items() if items]
        detail = f" ({', '.join(parts)})" if len(parts) > 1 else ""
        rows.append(("cost", f"{usd(float(cost['usd']))}{detail}"))
    else:
        unpriced = ", ".join(str(model) for model in cost.get("unpriced") or ())
        known = float(cost.get("known_usd") or 0.0)
        more = f"; {usd(known)} for the priced ones" if known else ""
        rows.append(("cost", f"unknown: no price for {unpriced} (add one with --prices FILE){more}"))
    return rows


def usd(amount: float) -> str:
    """Dollars with the digits a small figure needs ($0.000123), cents for a big one ($12.30)."""
    if amount >= 1:
        return f"${amount:,.2f}"
    text = f"{amount:.6f}".rstrip("0").rstrip(".")
    return f"${text}" if text != "0" or amount == 0 else "$<0.000001"


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


def render_provenance(console: Console, provenance: Provenance | None) -> None:
    """One compact block: which env code and data, which benchmax, model and sampling made the run."""
    if provenance is None:
        return
    block = Table(title="provenance", title_justify="left", show_header=False)
    block.add_column("what")
    block.add_column("value", overflow="fold")
    for name, value in provenance_lines(provenance):
        block.add_row(name, escape(value))
    console.print(block)


def provenance_lines(provenance: Provenance) -> list[tuple[str, str]]:
    if provenance.members:  # a mixture: each env's own code and data, under its name
        lines = [("env", f"mixture of {', '.join(name for name, _ in provenance.members)}")]
        for name, member in provenance.members:
            own = dict(_code_lines(member))
            lines += [(f"{name}: env", own["env"]), (f"{name}: code", own["code"]), (f"{name}: data", own["data"])]
        return lines + _run_lines(provenance)
    return _code_lines(provenance) + _run_lines(provenance)


def _code_lines(provenance: Provenance) -> list[tuple[str, str]]:
    env = provenance.env
    if env.kind == "package":
        who = f"{env.name} {env.version} (package {env.distribution}, {env.entry_point})"
    else:
        who = str(env.path or env.class_name or env.spec or "?")
    code = provenance.code
    git = provenance.git
    if git is not None:
        state = "dirty" if git.dirty else "clean" if git.dirty is False else "state unknown"
        where = f"git {str(git.commit or 'no commit')[:10]} ({state})"
    else:
        where = "not in git"
    more = ", truncated" if code.truncated else ""
    counted = f"{code.files} files, {_size(code.bytes)}{more}"
    return [
        ("env", who),
        ("code", f"{_digest(code.sha256)} ({counted}) · {where}"),
        ("data", _data_line(provenance.data)),
    ]


def _run_lines(provenance: Provenance) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    endpoint = provenance.endpoint
    if not endpoint:  # imported conversations: no endpoint was called, and their sampling is unknown
        lines.append(("model", provenance.model or "not recorded"))
    else:
        endpoints = ", ".join(endpoint) if isinstance(endpoint, tuple) else str(endpoint)
        sampling = provenance.sampling or {}
        knobs = " ".join(f"{key}={value}" for key, value in sampling.items()) or "server defaults"
        lines.append(("model", f"{provenance.model or 'not recorded'} at {endpoints} · {knobs}"))
    lines.append(("benchmax", f"{provenance.benchmax} (python {provenance.python})"))
    return lines


def _data_line(data: DataDigest | None) -> str:
    if data is None:
        return "not recorded"
    origin = data.origin
    hub = f"hub {origin['hub']}@{origin.get('revision') or 'default'} · " if origin and origin.get("hub") else ""
    if not data.files:
        return f"{hub}{data.source or '?'}, no local files"
    if len(data.files) == 1 and data.count == 1:
        entry = data.files[0]
        return f"{hub}{_digest(entry.sha256)} {Path(entry.path).name} ({_size(entry.size)})"
    return f"{hub}{_digest(data.sha256)} ({data.count} files, {_size(data.bytes)})"


def _digest(value: object) -> str:
    return str(value)[:12] if value else "none"


def _size(value: object) -> str:
    size = float(value or 0)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"
