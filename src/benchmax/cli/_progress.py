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
from benchmax.envs.logging import current_rollout_id


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


class LiveProgress:
    """Rollouts done/total, rollouts/s, running mean of each component, failures, tokens, outages.

    With several ``replicas``, one line each: up or down, and the requests it served.
    """

    def __init__(self, console: Console, *, replicas: Sequence[str] = ()) -> None:
        self.console = console
        self.replicas = tuple(replicas)
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
        self._sums: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()
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
        self._live.update(self._render())
        self._live.__exit__(None, None, None)
        if not self.console.is_terminal:
            # Rich ends the block with a newline only on a terminal: without one, whatever
            # comes next (an error, the summary) would start on the block's last line
            self.console.line()

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None:
        self._progress.update(self._task, total=total_rollouts, completed=done_rollouts)
        if done_rollouts:
            self.console.print(f"resuming: {done_rollouts:,} of {plural(total_rollouts, 'rollout')} already stored")
        self._started = time.perf_counter()
        self._live.update(self._render())

    def on_group(self, result: GroupResult) -> None:
        for outcome in result.outcomes:
            self._tokens += outcome.usage.total_tokens
            if not outcome.scored:
                self._failures[outcome.termination_reason] += 1
            for name, value in outcome.rewards.items():
                self._sums[name] += value
                self._counts[name] += 1
        self._done_here += len(result.outcomes)
        elapsed = time.perf_counter() - self._started
        self._progress.update(self._task, advance=len(result.outcomes), rate=rate_text(self._done_here, elapsed))
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
        means = "  ".join(f"{name}={self._sums[name] / self._counts[name]:.3f}" for name in sorted(self._counts))
        failures = "  ".join(f"{reason}={count}" for reason, count in self._failures.most_common())
        stats.add_row(Text("mean", style="bold"), Text(means or "-"))
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
        rollout = current_rollout_id()
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
