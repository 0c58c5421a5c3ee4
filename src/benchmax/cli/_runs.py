"""Commands over stored runs: ``export``, ``rescore`` and ``diff``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from benchmax.auth import bind_model_auth
from benchmax.cli._options import AuthBindings, TelemetryOptions, cache_settings, parse_auth, with_option_groups
from benchmax.cli._output import command_line, error_line, fit_table, plural
from benchmax.errors import BenchmaxError
from benchmax.runner import DEFAULT_CONCURRENCY, arescore
from benchmax.store import FORMATS, HEADLINE, Delta, Run, RunDiff, diff_runs, export_run, provenance_changes

console = Console()


def _open(path: Path) -> Run:
    try:
        return Run(path)
    except FileNotFoundError as exc:
        console.print(error_line(str(exc)))
        raise typer.Exit(2) from None


def _export_format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"unknown export format {value!r}; use one of {', '.join(FORMATS)}")
    return value


def export_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory.")],
    format: Annotated[
        str,
        typer.Option("--format", metavar=f"<{'|'.join(FORMATS)}>", callback=_export_format, help="The file format."),
    ] = "jsonl",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Output file (default: RUN_DIR/rollouts.FORMAT)."),
    ] = None,
) -> None:
    """Write every rollout of a run to one file, for analysis outside benchmax.

    Each rollout's transcript, its rewards (raw and filled, the fill mask), its
    advantage in its group, its example's fields and its logs.
    """
    with _open(run_dir) as run:
        target = output or run_dir / f"rollouts.{format}"
        try:
            count = export_run(run, target, format)
        except (ValueError, RuntimeError) as exc:
            console.print(error_line(str(exc)))
            raise typer.Exit(2) from None
    console.print(f"wrote {plural(count, 'rollout')} to {target}", soft_wrap=True, highlight=False, markup=False)


@with_option_groups
def rescore_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="The run whose transcripts to score again.")],
    env: Annotated[str | None, typer.Argument(metavar="ENV", help="Env spec (default: the one the run used).")] = None,
    output: Annotated[Path | None, typer.Option("--run-dir", help="Where to write the new run.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Processes scoring in parallel [default: one per core (up to 8) for big runs]; "
            "with --executor ray: Ray actors.",
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(min=1, help="Rollouts scored at once in all, as for eval (bounds a judge's calls in flight)."),
    ] = DEFAULT_CONCURRENCY,
    executor: Annotated[Literal["local", "ray"], typer.Option(help="Where groups are scored.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="auto or ray://host:port (with --executor ray).")] = None,
    cache: Annotated[
        str | None,
        typer.Option(
            metavar="DIR|off",
            help="Answer an LLM judge's repeated requests from the response cache in DIR (off unless given).",
            show_default=False,
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="A price table over the shipped one, for the judge's calls.", show_default=False
        ),
    ] = None,
    auth: AuthBindings = [],  # noqa: B006
    mix_env: Annotated[
        list[str],
        typer.Option(
            "--env",
            metavar="NAME=SPEC",
            help="In a mixture run: score env NAME with the code SPEC names (repeatable); the other envs as stored.",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    telemetry: TelemetryOptions = TelemetryOptions(),
) -> None:
    """Score stored transcripts with the env's current reward code, into a new run (no policy calls)."""
    from benchmax.cli._summary import render_provenance, render_summary

    providers = parse_auth(auth)
    env_specs: dict[str, str] = {}
    for item in mix_env:
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec or name in env_specs:
            raise typer.BadParameter(f"{item!r}: write NAME=SPEC, once per env", param_hint="--env")
        env_specs[name] = spec
    _open(run_dir).close()
    settings = cache_settings(cache)
    try:
        with bind_model_auth(providers):
            target = asyncio.run(
                arescore(
                    run_dir,
                    env_spec=env,
                    run_dir=output,
                    workers=workers,
                    concurrency=concurrency,
                    cache=settings,
                    prices=str(prices) if prices is not None else None,
                    auth=providers,
                    executor=executor,
                    ray_address=ray_address,
                    env_specs=env_specs,
                    telemetry=telemetry.settings(),
                )
            )
    except BenchmaxError as exc:
        console.print(error_line(str(exc)), highlight=False)
        raise typer.Exit(2) from None
    with Run(run_dir) as source:
        imported = source.meta.get("imported_from") is not None
    with Run(target) as run:
        meta = run.run_meta
        render_summary(console, run.stats(), cost=meta.cost, imported=imported)
        render_provenance(console, meta.provenance)
    for name, parts in (meta.replay_only or {}).items():
        console.print(
            f"[yellow]note:[/] {escape(str(name))}'s {escape(' and '.join(map(str, parts)))} come from its episodes "
            "(env_response): kept as stored, not recomputed (only a replay could); the outcome was rescored",
            soft_wrap=True,
            highlight=False,
        )
    console.print(
        f"rescored run stored in {target}; compare with: {command_line('benchmax', 'diff', run_dir, target)}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )


def diff_command(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="Baseline run.")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="Run to compare against the baseline.")],
    examples: Annotated[int, typer.Option(min=0, help="Example rows to show (largest changes first).")] = 20,
    force: Annotated[
        bool, typer.Option("--force", help="Print the tables even when the runs share no example.")
    ] = False,
) -> None:
    """Per-component and per-example reward deltas, B minus A (examples matched by id).

    Exits 2 when the runs share no example (nothing to compare), unless --force.
    """
    with _open(run_a) as a, _open(run_b) as b:
        result = diff_runs(a, b)
        if not result.same_env:
            console.print(
                f"[yellow]warning:[/] the runs are of different envs: A ran {escape(str(result.env_a))}, "
                f"B ran {escape(str(result.env_b))}",
                soft_wrap=True,
                highlight=False,
            )
        if not result.comparable:
            problem = (
                f"A and B share no example (A has {plural(len(result.only_in_a), 'example')} with rollouts, "
                f"B has {len(result.only_in_b):,}): there is nothing to compare"
            )
            if not force:
                console.print(error_line(f"{problem}; pass --force to print the tables anyway"), soft_wrap=True,
                              highlight=False)  # fmt: skip
                raise typer.Exit(2)
            console.print(f"[yellow]warning:[/] {escape(problem)}", soft_wrap=True, highlight=False)
        changes = provenance_changes(a.run_meta.provenance, b.run_meta.provenance)
        rows = _example_rows(result)
        shown_ids = [row.example_id for row in rows[:examples]]
        prompts = a.prompts(shown_ids)
        short = a.short_ids(shown_ids, among=[b])
    for change in changes:
        label = "[yellow]warning:[/] " if change.warning else "note: "
        console.print(f"{label}{escape(change.text)}", soft_wrap=True, highlight=False)
    if any(change.warning for change in changes):
        console.print("  reward deltas below may come from these changes, not only from the model", highlight=False)
    names = [delta.component for delta in result.components if delta.component != HEADLINE]
    single = len(names) == 1 and _same_deltas(result, names[0])
    if result.several_envs:
        _print_suite(result)  # a component's mean over the run would mix envs: per env only
    else:
        _print_components(result, single=single)
    if result.turn_rewards:
        _print_turn_rewards(result)
    if not rows:
        console.print(f"examples: none changed ({plural(result.shared, 'example')} compared)", highlight=False)
    else:
        _print_examples(rows[:examples], len(rows), prompts, short, per_component=not single)
    if result.only_in_a or result.only_in_b:
        console.print(
            f"examples only in A: {len(result.only_in_a):,}, only in B: {len(result.only_in_b):,} (not compared)"
        )


def _print_turn_rewards(result: RunDiff) -> None:
    """The envs' turn rewards (``env_response``), mean per turn over each whole run, A beside B."""
    table = Table(title="turn rewards, mean per turn (B - A)", title_justify="left")
    table.add_column("component", overflow="fold")
    for column in ("A", "B", "delta", "turns A", "turns B"):
        table.add_column(column, justify="right", no_wrap=True)
    for delta in result.turn_rewards:
        table.add_row(
            escape(delta.component), _fmt(delta.mean_a), _fmt(delta.mean_b), _fmt(delta.delta, signed=True),
            f"{delta.count_a:,}", f"{delta.count_b:,}",
        )  # fmt: skip
    console.print(table)


def _print_suite(result: RunDiff) -> None:
    """One block of rows per env: its pass rate and each component it emitted, A beside B.

    Long rather than wide (a row per figure), so any number of components fits 80 columns."""
    table = Table(title="per env (B - A)", title_justify="left")
    table.add_column("env", overflow="fold")
    table.add_column("figure", overflow="fold")
    for column in ("A", "B", "delta"):
        table.add_column(column, justify="right", no_wrap=True)
    for index, delta in enumerate(result.envs):
        env = escape(str(delta.env))
        if index:
            table.add_section()
        rate_a = delta.a.pass_rate if delta.a is not None else None
        rate_b = delta.b.pass_rate if delta.b is not None else None
        table.add_row(env, "pass rate", _fmt(rate_a), _fmt(rate_b), _fmt(delta.pass_delta, signed=True))
        for name in delta.component_names:
            mean_a, mean_b = delta.component(name)
            change = None if mean_a is None or mean_b is None else mean_b - mean_a
            table.add_row("", escape(name), _fmt(mean_a), _fmt(mean_b), _fmt(change, signed=True))
    console.print(table)


def _print_components(result: RunDiff, *, single: bool) -> None:
    table = Table(title="components (B - A)", title_justify="left")
    table.add_column("component", overflow="fold")
    for column in ("A", "B", "delta"):
        table.add_column(column, justify="right", no_wrap=True)
    for delta in result.components:
        if single and delta.component == HEADLINE:
            continue  # one component: the total is that component, row for row
        table.add_row(delta.component, _fmt(delta.mean_a), _fmt(delta.mean_b), _fmt(delta.delta, signed=True))
    console.print(table)


def _print_examples(
    rows: list[_ExampleRow], changed: int, prompts: dict[str, str], short: dict[str, str], *, per_component: bool
) -> None:
    """One row per changed example, laid out for an 80-column terminal.

    The id is its short form and never wraps, the numbers never shrink; the
    components that changed are named in one column (a column per component
    does not fit 80 columns past two of them), and the prompt takes what width
    is left, cut with an ellipsis.
    """
    console.print(f"examples with the largest changes ({plural(changed, 'example')} changed)", highlight=False)
    per_example = Table()
    per_example.add_column("example", no_wrap=True)
    for column in ("A", "B", "delta"):
        per_example.add_column(column, justify="right", no_wrap=True)
    if per_component:
        per_example.add_column("changed components", overflow="fold", max_width=32)
    per_example.add_column("prompt")
    for row in rows:
        cells = [
            Text(short.get(row.example_id, row.example_id)),
            _fmt(row.total.mean_a),
            _fmt(row.total.mean_b),
            _fmt(row.total.delta, signed=True),
        ]
        if per_component:
            cells.append(Text(_changed_components(row)))
        per_example.add_row(*cells, Text(prompts.get(row.example_id, "")))
    console.print(fit_table(console, per_example, "prompt"))


def _changed_components(row: _ExampleRow) -> str:
    """``correct +1.0000, bonus new`` for the components of one example that moved, largest first."""
    moved: list[tuple[float, str]] = []
    for name, delta in sorted(row.components.items()):
        if delta.mean_a is None and delta.mean_b is not None:
            moved.append((abs(delta.mean_b), f"{name} new"))
        elif delta.mean_b is None and delta.mean_a is not None:
            moved.append((abs(delta.mean_a), f"{name} gone"))
        elif delta.delta is not None and abs(delta.delta) > _SAME:
            moved.append((abs(delta.delta), f"{name} {_fmt(delta.delta, signed=True)}"))
    return ", ".join(text for _, text in sorted(moved, key=lambda item: -item[0])) or "-"


@dataclass(frozen=True, slots=True)
class _ExampleRow:
    """One shared example's deltas: its total reward and each component."""

    example_id: str
    total: Delta
    components: dict[str, Delta]

    @property
    def change(self) -> float:
        deltas = [self.total.delta, *(delta.delta for delta in self.components.values())]
        return max((abs(value) for value in deltas if value is not None), default=0.0)


def _example_rows(result: RunDiff) -> list[_ExampleRow]:
    """The changed shared examples, one row each, largest change first (ties by id)."""
    by_example: dict[str, dict[str, Delta]] = {}
    for delta in result.examples:
        by_example.setdefault(delta.example_id or "", {})[delta.component] = delta
    rows = [
        _ExampleRow(example_id, deltas[HEADLINE], {k: v for k, v in deltas.items() if k != HEADLINE})
        for example_id, deltas in by_example.items()
    ]
    changed = [row for row in rows if row.change > _SAME]
    return sorted(changed, key=lambda row: (-row.change, row.example_id))


_SAME = 1e-12


def _same_deltas(result: RunDiff, component: str) -> bool:
    """Whether a run's only component equals its total reward, overall and on every shared example."""
    pairs: dict[str | None, dict[str, Delta]] = {}
    for delta in (*result.components, *result.examples):
        pairs.setdefault(delta.example_id, {})[delta.component] = delta
    for deltas in pairs.values():
        total, part = deltas.get(HEADLINE), deltas.get(component)
        if total is None or part is None:
            return False
        for x, y in ((total.mean_a, part.mean_a), (total.mean_b, part.mean_b)):
            if (x is None) != (y is None) or (x is not None and y is not None and abs(x - y) > _SAME):
                return False
    return True


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"
