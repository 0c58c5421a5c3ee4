"""Local vs Ray executor on this machine: rollouts/s, and what each group pays for the trip to an actor.

Both modes run the same eval through the runner (store writes included) against
the bench's fake server (``fake_server.py``, a process of its own) with the
bench's ``AddEnv`` (two model turns and one tool call per rollout). Figures are
taken from the moment scheduling starts to the last stored group, so Ray's
start-up (``ray.init``, placing actors, building their envs) is reported on its
own line and not folded into throughput.

* throughput: ``--rollouts`` rollouts with ``--in-flight`` in flight;
* overhead per group: ``--overhead-groups`` groups one at a time (no overlap),
  so the difference in ms per group between the modes is the dispatch cost:
  pickling requests and outcomes, two hops through Ray, the actor's loop.

    python bench/ray_bench.py --workers 2 --rollouts 2000 --in-flight 64
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.runner import RunConfig, arun

BENCH = Path(__file__).resolve().parent
SPEC = f"{BENCH / 'scenario.py'}:AddEnv"


@dataclass
class _Clock:
    started: float = 0.0
    last: float = 0.0
    groups: int = 0
    failures: int = 0

    def on_start(self, **_: Any) -> None:
        self.started = time.perf_counter()

    def on_group(self, result: Any, *, env: str | None = None) -> None:
        self.last = time.perf_counter()
        self.groups += 1
        self.failures += sum(
            outcome.termination_reason != "finished" or outcome.rewards.get("correct") != 1.0
            for outcome in result.outcomes
        )


@dataclass(frozen=True)
class Measured:
    rollouts: int
    groups: int
    seconds: float
    setup_seconds: float
    failures: int

    @property
    def per_second(self) -> float:
        return self.rollouts / self.seconds

    @property
    def ms_per_group(self) -> float:
        return 1000 * self.seconds / max(1, self.groups)


async def _measure(
    executor: str, *, groups: int, group_size: int, in_flight: int, workers: int, base_url: str
) -> Measured:
    clock = _Clock()
    with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
        config = RunConfig(
            env=SPEC,
            env_kwargs={"examples": groups},
            split="eval",
            group_size=group_size,
            concurrency=in_flight,
            model="fake",
            base_url=base_url,
            run_dir=Path(tmp) / "run",
            executor=executor,
            workers=workers,
        )
        began = time.perf_counter()
        result = await arun(config, observer=clock)
    assert result.stats.rollouts == groups * group_size, result.stats
    return Measured(
        rollouts=groups * group_size,
        groups=groups,
        seconds=clock.last - clock.started,
        setup_seconds=clock.started - began,
        failures=clock.failures,
    )


def _start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().strip()
    if not line.startswith("listening on "):
        server.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return server, line.removeprefix("listening on ")


async def _main(args: argparse.Namespace) -> None:
    import ray

    server, base_url = _start_server(args.latency_ms)
    try:
        began = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING")
        ray_init = time.perf_counter() - began
        groups = args.rollouts // args.group_size
        rows: list[tuple[str, Measured, Measured]] = []
        for executor in ("local", "ray"):
            # One warm-up run per mode so imports and first connections are not measured.
            await _measure(
                executor,
                groups=4,
                group_size=args.group_size,
                in_flight=args.in_flight,
                workers=args.workers,
                base_url=base_url,
            )
            sequential = await _measure(
                executor,
                groups=args.overhead_groups,
                group_size=1,
                in_flight=1,
                workers=args.workers,
                base_url=base_url,
            )
            busy = await _measure(
                executor,
                groups=groups,
                group_size=args.group_size,
                in_flight=args.in_flight,
                workers=args.workers,
                base_url=base_url,
            )
            rows.append((executor, busy, sequential))
    finally:
        server.terminate()
        server.wait(10)
        ray.shutdown()

    local_ms = rows[0][2].ms_per_group
    print(f"machine: {_cpus()} CPUs; fake server latency {args.latency_ms:g} ms; ray {ray.__version__}")
    print(f"ray.init (local cluster, {args.workers} CPUs): {ray_init:.1f} s")
    print()
    print(
        f"| executor | rollouts/s ({args.rollouts} rollouts, groups of {args.group_size}, {args.in_flight} in flight) "
        "| ms per group, one at a time | overhead per group | pool start | failures |"
    )
    print("|---|---|---|---|---|---|")
    for executor, busy, sequential in rows:
        name = executor if executor == "local" else f"ray ({args.workers} workers)"
        print(
            f"| {name} | {busy.per_second:,.0f} | {sequential.ms_per_group:.2f} "
            f"| {sequential.ms_per_group - local_ms:+.2f} ms | {busy.setup_seconds:.1f} s "
            f"| {busy.failures + sequential.failures} |"
        )


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=64, help="rollouts in flight (RunConfig.concurrency)")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors")
    parser.add_argument("--overhead-groups", type=int, default=200, help="single-rollout groups run one at a time")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="fake server delay per completion")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
