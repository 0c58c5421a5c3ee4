"""The live progress display of ``benchmax eval`` (Rich)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from benchmax.engine.engine import GroupResult


class LiveProgress:
    """Rollouts done/total, rollouts/s, running mean of each component, failures, tokens."""

    def __init__(self, console: Console) -> None:
        self.console = console
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
        self._live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render())
        self._live.__exit__(None, None, None)

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None:
        self._progress.update(self._task, total=total_rollouts, completed=done_rollouts)
        if done_rollouts:
            self.console.print(f"resuming: {done_rollouts} of {total_rollouts} rollouts already stored")
        self._started = time.perf_counter()
        self._live.update(self._render())

    def on_group(self, result: GroupResult) -> None:
        for outcome in result.outcomes:
            self._tokens += outcome.usage.total_tokens
            if not outcome.rewards:
                self._failures[outcome.termination_reason] += 1
            for name, value in outcome.rewards.items():
                self._sums[name] += value
                self._counts[name] += 1
        self._done_here += len(result.outcomes)
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        self._progress.update(
            self._task, advance=len(result.outcomes), rate=f"{self._done_here / elapsed:.1f} rollouts/s"
        )
        self._live.update(self._render())

    def _render(self) -> Group:
        stats = Table.grid(padding=(0, 2))
        means = "  ".join(
            f"{name}={self._sums[name] / self._counts[name]:.3f}" for name in sorted(self._counts)
        )
        failures = "  ".join(f"{reason}={count}" for reason, count in self._failures.most_common())
        stats.add_row(Text("mean", style="bold"), Text(means or "-"))
        stats.add_row(Text("failures", style="bold"), Text(failures or "none", style="red" if failures else ""))
        stats.add_row(Text("tokens", style="bold"), Text(f"{self._tokens:,}"))
        return Group(self._progress, stats)
