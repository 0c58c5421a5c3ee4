"""What ``benchmax eval`` shows while it runs: live progress, outages, and log records kept short."""

from __future__ import annotations

import logging
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from benchmax.cli._output import plural
from benchmax.client import GateEvent, Outage
from benchmax.engine import GroupResult
from benchmax.envs import current_scope


def rate_text(done: int, seconds: float) -> str:
    """Rollouts per second to the digits that mean something.

    A slow model (the embedded one on two cores: a rollout every half minute)
    must not read "0.0 rollouts/s", as if nothing moved; a fast one needs no decimals.
    """
    rate = done / max(seconds, 1e-9)
    if rate >= 10:
        return f"{rate:,.0f} rollouts/s"
    if rate >= 1 or rate == 0:
        return f"{rate:.1f} rollouts/s"
    return f"{rate:.2g} rollouts/s"


def load_text(in_flight: int, waiting: int) -> str:
    """``8 rollouts, 7 of them waiting for the model``: where the rollouts in flight are (the 7 are
    among the 8, queued behind the one the model serves)."""
    text = plural(in_flight, "rollout")
    return f"{text}, {waiting:,} of them waiting for the model" if waiting else text


class LiveProgress:
    """Rollouts done/total, rollouts/s, running mean of each component, failures, tokens, outages.

    The means are the summary tables': a component a rollout lacks counts as 0 where
    another rollout emitted it. A mixture's are per env (one line each, as its per-env
    table), since one env's components mean nothing averaged over another's rollouts.

    With several ``replicas``, one line each: up or down, and the requests it served.
    ``starting`` (``"starting the model"`` for the embedded one) is shown until the
    first rollout is due, so the seconds a model takes to load do not read as a hang;
    then the rollouts in flight, and how many of them wait for the model.
    """

    def __init__(self, console: Console, *, replicas: Sequence[str] = (), starting: str | None = None) -> None:
        self.console = console
        self.replicas = tuple(replicas)
        self._starting = starting
        self._load: tuple[int, int] | None = None
        self._requests: dict[str, int] = {}
        self._progress = Progress(
            TextColumn("[bold]rollouts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._progress.add_task("rollouts", total=0, rate="")
        self._sums: Counter[tuple[str | None, str]] = Counter()
        self._counts: Counter[tuple[str | None, str]] = Counter()
        self._failures: Counter[str] = Counter()
        self._tokens = 0
        self._done_here = 0
        self._started = time.perf_counter()
        self._down: dict[str, tuple[Outage, int]] = {}
        self._live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._load = None  # the last count would read as rollouts still running
        self._starting = None
        self._live.update(self._render())
        self._live.__exit__(None, None, None)
        if not self.console.is_terminal:
            # Rich ends the block with a newline only on a terminal: without one, whatever
            # comes next (an error, the summary) would start on the block's last line
            self.console.line()

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None:
        self._starting = None
        self._progress.update(self._task, total=total_rollouts, completed=done_rollouts)
        if done_rollouts:
            self.console.print(f"resuming: {done_rollouts:,} of {plural(total_rollouts, 'rollout')} already stored")
            self._seed(run_dir)
        self._started = time.perf_counter()
        self._live.update(self._render())

    def _seed(self, run_dir: Path) -> None:
        """Start a resumed run's means from the stored rollouts, as the summary table counts them."""
        from benchmax.store import Run

        try:
            with Run(run_dir) as run:
                stats = run.stats(examples=0)
        except Exception:  # a store this version cannot read: the line counts this session only
            return
        if stats.several_envs:
            for env in stats.envs:
                for name, mean in env.components.items():  # weighed by the env's rollouts, as it goes on
                    self._sums[env.env, name] = mean * env.rollouts
                    self._counts[env.env, name] = env.rollouts
            return
        for name, figures in stats.components.items():
            self._sums[None, name] = figures.mean * figures.count
            self._counts[None, name] = figures.count

    def on_group(self, result: GroupResult, *, env: str | None = None) -> None:
        emitted = {name for outcome in result.outcomes for name in outcome.rewards}
        emitted |= {name for known, name in self._counts if known == env}
        for outcome in result.outcomes:
            self._tokens += outcome.usage.total_tokens
            if not outcome.scored:
                self._failures[outcome.termination_reason] += 1
            # a component a rollout lacks counts as 0, as the batch zero-fill stores it (within its env)
            for name in emitted:
                self._sums[env, name] += outcome.rewards.get(name, 0.0)
                self._counts[env, name] += 1
        self._done_here += len(result.outcomes)
        elapsed = time.perf_counter() - self._started
        self._progress.update(self._task, advance=len(result.outcomes), rate=rate_text(self._done_here, elapsed))
        self._live.update(self._render())

    def on_load(self, *, in_flight: int, waiting: int) -> None:
        """Rollouts started and not yet done, and how many of them wait for the model (a request queued)."""
        self._load = (in_flight, waiting)
        self._live.update(self._render())

    def on_outage(self, event: GateEvent, outage: Outage, waiting: int) -> None:
        if event == "up":
            self._down.pop(outage.endpoint, None)
        else:
            self._down[outage.endpoint] = (outage, waiting)
        self._live.update(self._render())

    def on_endpoints(self, stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Requests per server so far (``ClientPool.stats()["endpoints"]``)."""
        self._requests = {url: int(figures.get("requests") or 0) for url, figures in stats.items()}
        self._live.update(self._render())

    def _render(self) -> Group:
        stats = Table.grid(padding=(0, 2))
        if self._starting is not None:
            stats.add_row(Text("model", style="bold"), Text(f"{self._starting}…"))
        elif self._load is not None:
            in_flight, waiting = self._load
            stats.add_row(Text("in flight", style="bold"), Text(load_text(in_flight, waiting)))
        envs = sorted({env for env, _ in self._counts}, key=lambda env: env or "")
        if envs and envs != [None]:
            for env in envs:  # a mixture: one line per env, the per-env table's figures
                stats.add_row(Text(f"mean {env or '-'}", style="bold"), Text(self._means(env)))
        else:
            stats.add_row(Text("mean", style="bold"), Text(self._means(None) or "-"))
        failures = "  ".join(f"{reason}={count}" for reason, count in self._failures.most_common())
        stats.add_row(Text("failures", style="bold"), Text(failures or "none", style="red" if failures else ""))
        stats.add_row(Text("tokens", style="bold"), Text(f"{self._tokens:,}"))
        if len(self.replicas) > 1:
            self._render_replicas(stats)
        else:
            for endpoint, (outage, waiting) in self._down.items():
                stats.add_row(
                    Text("endpoint", style="bold red"),
                    Text(f"{endpoint} {_down_state(outage)} ({plural(waiting, 'rollout')} waiting)", style="red"),
                )
        return Group(self._progress, stats)

    def _means(self, env: str | None) -> str:
        names = sorted(name for known, name in self._counts if known == env)
        return "  ".join(f"{name}={self._sums[env, name] / self._counts[env, name]:.3f}" for name in names)

    def _render_replicas(self, stats: Table) -> None:
        all_down = all(url in self._down for url in self.replicas)
        total = sum(self._requests.get(url, 0) for url in self.replicas)
        for url in self.replicas:
            served = self._requests.get(url, 0)
            share = f", {served / total:.0%}" if total else ""
            down = self._down.get(url)
            if down is None:
                stats.add_row(Text("replica", style="bold"), Text(f"{url} up ({served:,} requests{share})"))
                continue
            outage, waiting = down
            then = f"{plural(waiting, 'rollout')} waiting" if all_down else "its rollouts go to the other replicas"
            stats.add_row(
                Text("replica", style="bold red"),
                Text(f"{url} {_down_state(outage)} ({then}; {served:,} requests{share})", style="red"),
            )


def _down_state(outage: Outage) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(outage.started_at))
    return f"down since {since}, past its outage budget" if outage.failed else f"down since {since}"


class _ConsoleLogs(logging.Handler):
    """Warnings and errors on the console, each kind once: the first in full, with its rollout id.

    A reward hook that raises for every rollout would otherwise print one full
    traceback per rollout; the repeats are counted and summarised at the end.
    """

    def __init__(self, console: Console) -> None:
        super().__init__(level=logging.WARNING)
        self.console = console
        self.repeats: Counter[tuple[str, int, str, str]] = Counter()
        self.first: dict[tuple[str, int, str, str], str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, record.levelno, str(record.msg), error)
        self.repeats[key] += 1
        if self.repeats[key] > 1:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        rollout = current_scope().rollout_id
        where = f" (rollout {rollout})" if rollout else ""
        self.first[key] = message
        style = "red" if record.levelno >= logging.ERROR else "yellow"
        self.console.print(
            f"[{style}]{record.levelname.lower()}[/] {escape(record.name)}: {escape(message)}{escape(where)}",
            soft_wrap=True,
            highlight=False,
        )
        if record.exc_info and record.exc_info[0] is not None:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def summarise(self) -> None:
        for key, count in self.repeats.items():
            if count > 1:
                self.console.print(
                    f"[dim]… {count - 1} more like: {escape(self.first.get(key, key[2])[:160])}[/]",
                    soft_wrap=True,
                    highlight=False,
                )


@contextmanager
def install_log_handler(console: Console) -> Iterator[None]:
    """Route warnings and errors to ``console`` (above any live display), deduplicated, for one command."""
    root = logging.getLogger()
    handler = _ConsoleLogs(console)
    replaced = [existing for existing in root.handlers if type(existing) is logging.StreamHandler]
    for existing in replaced:
        root.removeHandler(existing)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for existing in replaced:
            root.addHandler(existing)
        handler.summarise()
