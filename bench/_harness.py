"""Measurement shared by both drivers: ours and the reference (stdlib only, 3.11 and 3.12).

A driver hands :func:`measure` a coroutine that runs the whole workload and
calls :meth:`Recorder.group_done` as each group settles. Figures come from the
steady-state window only: from the moment the first wave of ``in_flight``
rollouts has settled to the moment only the last wave is left, so ramp-up
(connection set-up, imports warming) and the draining tail, where fewer than
``in_flight`` rollouts run, do not dilute throughput or CPU per rollout.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

_TICK = 0.01


@dataclass
class Recorder:
    """Group completions plus loop-lag and CPU samples, all on ``perf_counter``."""

    in_flight: int
    ends: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    failure_kinds: dict[str, int] = field(default_factory=dict)
    lag_times: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    iteration_ends: list[float] = field(default_factory=list)
    iteration_cpu: list[float] = field(default_factory=list)

    def watch_iterations(self, loop: asyncio.AbstractEventLoop) -> None:
        """Time the CPU each iteration of an asyncio loop takes (uvloop cannot be watched).

        On a busy machine the loop lag measures the other jobs as much as the driver
        (a descheduled process wakes late); an iteration's CPU time does not, and on a
        quiet machine the lag is about one iteration's length.
        """
        run_once = getattr(loop, "_run_once", None)
        if run_once is None or not isinstance(loop, asyncio.BaseEventLoop):
            return
        ends, spent = self.iteration_ends, self.iteration_cpu
        clock, wall = time.thread_time, time.perf_counter

        def timed() -> None:
            started = clock()
            run_once()
            spent.append(clock() - started)
            ends.append(wall())

        loop._run_once = timed  # type: ignore[attr-defined]

    def group_done(self, latency: float, reasons: list[str]) -> None:
        """One settled group: ``reasons`` holds ``"ok"`` or why each rollout failed."""
        self.ends.append(time.perf_counter())
        self.sizes.append(len(reasons))
        self.latencies.append(latency)
        for reason in reasons:
            if reason != "ok":
                self.failures += 1
                self.failure_kinds[reason] = self.failure_kinds.get(reason, 0) + 1

    async def sample(self) -> None:
        """Loop lag every 10 ms (how late a sleep wakes) and process CPU (all threads)."""
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + _TICK
            await asyncio.sleep(_TICK)
            now = time.perf_counter()
            self.lag_times.append(now)
            self.lags.append(max(0.0, loop.time() - expected))
            self.cpu_times.append(now)
            self.cpu.append(time.process_time())

    def summary(self) -> dict[str, object]:
        total = sum(self.sizes)
        order = sorted(range(len(self.ends)), key=self.ends.__getitem__)
        ends = [self.ends[i] for i in order]
        sizes = [self.sizes[i] for i in order]
        done = 0
        start_index = end_index = None
        for index, size in enumerate(sizes):
            done += size
            if start_index is None and done >= self.in_flight:
                start_index = index
            if done <= total - self.in_flight:
                end_index = index
        if start_index is None or end_index is None or end_index <= start_index:
            start_index, end_index = 0, len(ends) - 1
            window_rollouts = total
            t0 = self.cpu_times[0] if self.cpu_times else ends[0]
        else:
            window_rollouts = sum(sizes[start_index + 1 : end_index + 1])
            t0 = ends[start_index]
        t1 = ends[end_index]
        seconds = max(t1 - t0, 1e-9)
        cpu = _at(self.cpu_times, self.cpu, t1) - _at(self.cpu_times, self.cpu, t0)
        in_window = [
            latency for end, latency in zip(self.ends, self.latencies, strict=True) if t0 < end <= t1
        ] or self.latencies
        lags = [lag for when, lag in zip(self.lag_times, self.lags, strict=True) if t0 <= when <= t1]
        iterations = [
            cpu for when, cpu in zip(self.iteration_ends, self.iteration_cpu, strict=True) if t0 <= when <= t1
        ]
        return {
            "rollouts": total,
            "window_rollouts": window_rollouts,
            "window_seconds": round(seconds, 3),
            "rollouts_per_s": round(window_rollouts / seconds, 1),
            "cpu_ms_per_rollout": round(1000 * cpu / max(window_rollouts, 1), 3),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "failures": self.failures,
            "failure_kinds": self.failure_kinds,
            "group_p50_s": round(_quantile(in_window, 0.5), 4),
            "group_p99_s": round(_quantile(in_window, 0.99), 4),
            "loop_lag_p99_ms": round(1000 * _quantile(lags, 0.99), 2),
            "loop_lag_max_ms": round(1000 * max(lags, default=0.0), 2),
            "loop_iteration_cpu_p99_ms": round(1000 * _weighted_quantile(iterations, 0.99), 2),
        }


def _at(times: list[float], values: list[float], when: float) -> float:
    """``values`` linearly interpolated at ``when``."""
    if not times:
        return time.process_time()
    index = bisect.bisect_left(times, when)
    if index <= 0:
        return values[0]
    if index >= len(times):
        return values[-1]
    t_a, t_b = times[index - 1], times[index]
    share = (when - t_a) / (t_b - t_a) if t_b > t_a else 0.0
    return values[index - 1] + share * (values[index] - values[index - 1])


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _weighted_quantile(values: list[float], q: float) -> float:
    """The value below which a share ``q`` of the total (not of the count) lies: the iteration
    length the loop's time is spent in, as a 10 ms sampler meets it."""
    total = sum(values)
    if not total:
        return 0.0
    seen = 0.0
    for value in sorted(values):
        seen += value
        if seen >= q * total:
            return value
    return max(values)


def peak_rss_mb() -> float:
    """The process's peak resident set (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def closed_loop(
    run_group: Callable[[int], Awaitable[list[str]]],
    recorder: Recorder,
    *,
    groups: int,
    concurrent_groups: int,
) -> None:
    """Keep ``concurrent_groups`` groups running until ``groups`` have settled."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < groups:
            index = next_index
            next_index += 1
            started = time.perf_counter()
            reasons = await run_group(index)
            recorder.group_done(time.perf_counter() - started, reasons)

    await asyncio.gather(*(worker() for _ in range(concurrent_groups)))


async def measure(recorder: Recorder, workload: Awaitable[None]) -> dict[str, object]:
    recorder.watch_iterations(asyncio.get_running_loop())
    sampler = asyncio.create_task(recorder.sample())
    try:
        await workload
    finally:
        sampler.cancel()
    return recorder.summary()


def emit(result: dict[str, object]) -> None:
    """The driver's one result line, which ``run.py`` reads."""
    sys.stdout.write("BENCH_RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
