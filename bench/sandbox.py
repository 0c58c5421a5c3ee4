"""Sandbox throughput: start latency, warm-pool takes, exec round trips, and swe-env rollouts/s.

Prints one table. Not a timed test: run it on a quiet machine for figures.

    python bench/sandbox.py                       # local (bubblewrap) provider
    python bench/sandbox.py --starts 20 --execs 200 --in-flight 16   # quicker
    DOCKER_HOST=unix:///path/docker.sock python bench/sandbox.py --docker IMAGE   # Docker provider too

- **start**: ``provider.start()`` until the sandbox answers, then ``stop()`` (stop not counted),
  one at a time, so each figure is one cold start's latency.
- **warm take**: ``SandboxPool.acquire()`` from a pool kept ``--pool`` full, one at a time, with a
  pause between takes long enough for the pool to refill (the figure is the take alone).
- **exec**: ``exec(["/bin/sh", "-c", ":"])`` in one running sandbox, one at a time: the round trip host ->
  agent -> fork/exec -> reply.
- **swe rollouts/s**: ``examples/swe`` through the engine against a loopback ScriptedServer
  playing the scripted engineer (4 tool calls: two test runs, a read, a write; then the hidden
  tests in the same sandbox): ``--rollouts-per-slot`` x in-flight rollouts with that many in
  flight. CPU ms/rollout is this process's CPU (the sandboxes' own processes are not in it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmax.engine import Engine, EngineConfig  # noqa: E402
from benchmax.envs import RolloutRequest  # noqa: E402
from benchmax.loading import EnvSpec  # noqa: E402
from benchmax.sandbox import BwrapProvider, DockerProvider, SandboxPool, SandboxProvider  # noqa: E402
from benchmax.testing import ScriptedServer  # noqa: E402

NOOP = ["/bin/sh", "-c", ":"]
"""The command timed for the exec round trip: every image has /bin/sh."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float], unit: str = "ms") -> str:
    scale = 1000.0 if unit == "ms" else 1.0
    return (
        f"| {name} | {len(values)} | {statistics.median(values) * scale:,.1f} | "
        f"{percentile(values, 0.99) * scale:,.1f} | {max(values) * scale:,.1f} |"
    )


async def starts(provider: SandboxProvider, count: int) -> list[float]:
    sandbox = await provider.start()  # warm the provider's check and the page cache
    await sandbox.stop()
    times = []
    for _ in range(count):
        began = time.perf_counter()
        sandbox = await provider.start()
        times.append(time.perf_counter() - began)
        await sandbox.stop()
    return times


async def warm_takes(provider: SandboxProvider, count: int, size: int) -> list[float]:
    times = []
    async with SandboxPool(provider, size=size) as pool:
        for _ in range(count):
            while pool.ready < size:
                if pool.failure is not None:
                    raise RuntimeError(f"the pool stopped refilling: {pool.failure}") from pool.failure
                await asyncio.sleep(0.01)
            began = time.perf_counter()
            sandbox = await pool.acquire()
            times.append(time.perf_counter() - began)
            await sandbox.stop()
        if pool.misses:
            print(f"(warm pool: {pool.misses} misses)", file=sys.stderr)
    return times


async def execs(provider: SandboxProvider, count: int) -> list[float]:
    times = []
    async with provider.sandbox() as sandbox:
        await sandbox.exec(NOOP)
        for _ in range(count):
            began = time.perf_counter()
            result = await sandbox.exec(NOOP)
            times.append(time.perf_counter() - began)
            assert result.exit_code == 0, result
    return times


def load_policy():
    spec = importlib.util.spec_from_file_location("swe_policy", ROOT / "examples" / "swe" / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solver


async def swe_rollouts(in_flight: int, per_slot: int, warm: int) -> tuple[float, float, int, int, float]:
    """(rollouts/s, CPU ms per rollout, rollouts, failures, p50 rollout seconds)."""
    env = EnvSpec(str(ROOT / "examples" / "swe")).load_class()(warm=warm)
    dataset = list(await env.create_dataset("train", ROOT / "examples" / "swe"))
    total = in_flight * per_slot
    failures = 0
    durations: list[float] = []
    with ScriptedServer(load_policy()(dataset)) as server:
        engine = Engine(env, EngineConfig())
        slots = asyncio.Semaphore(in_flight)

        async def one(index: int) -> None:
            nonlocal failures
            request = RolloutRequest(f"b{index}", dataset[index % len(dataset)], "scripted", server.base_url)
            async with slots:
                began = time.perf_counter()
                (outcome,) = (await engine.run_group([request])).outcomes
                durations.append(time.perf_counter() - began)
            if outcome.rewards != {"hidden_tests": 1.0, "tests_untouched": 1.0}:
                failures += 1

        cpu, began = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(index) for index in range(total)))
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        await engine.aclose()
    await env.aclose()
    return total / wall, cpu * 1000 / total, total, failures, statistics.median(durations)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=100)
    parser.add_argument("--execs", type=int, default=1000)
    parser.add_argument("--pool", type=int, default=4)
    parser.add_argument("--in-flight", default="16,64", help="comma-separated in-flight levels for the swe env")
    parser.add_argument("--rollouts-per-slot", type=int, default=4)
    parser.add_argument("--warm", type=int, default=0, help="the swe env's warm pool size")
    parser.add_argument("--docker", metavar="IMAGE", help="also measure the Docker provider with this image")
    args = parser.parse_args()

    providers: list[tuple[str, SandboxProvider]] = [("bwrap", BwrapProvider())]
    if args.docker:
        providers.append(("docker", DockerProvider(image=args.docker)))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    print()
    print("| measure | n | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for name, provider in providers:
        count = args.starts if name == "bwrap" else max(5, args.starts // 10)
        print(row(f"{name} start", await starts(provider, count)))
        print(row(f"{name} warm take (pool {args.pool})", await warm_takes(provider, count, args.pool)))
        print(row(f"{name} exec `sh -c :`", await execs(provider, args.execs if name == "bwrap" else args.execs // 10)))
        await provider.aclose()
    print()
    print("| swe env, scripted policy | rollouts | rollouts/s | CPU ms/rollout (driver) | rollout p50 s | failures |")
    print("|---|---:|---:|---:|---:|---:|")
    for level in (int(part) for part in args.in_flight.split(",")):
        rate, cpu, total, failures, p50 = await swe_rollouts(level, args.rollouts_per_slot, args.warm)
        print(f"| {level} in flight | {total} | {rate:,.1f} | {cpu:,.1f} | {p50:.2f} | {failures} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process: {peak:,.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
