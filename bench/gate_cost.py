"""What the endpoint health gate and the replica router cost on the hot path: driver CPU ms per rollout.

Three variants of the same run (``driver_ours.py``, runner and store, 0 ms fake
model), alternated in fresh pinned processes so drift in machine load hits all
alike: ``no gate`` (each endpoint's gate swapped for one that does nothing),
``gate`` (the default: one endpoint behind its gate, 256 requests on the wire)
and ``gate + router`` (two replicas, two fake servers, requests spread by the
router, 128 on the wire each, so as many requests are in flight as with one).
``gate + router 2x256`` keeps the per-replica default, so twice as many
requests are on the wire, which costs CPU of its own (see ``bench/README.md``).
Prints each run, then the medians and the ratios to ``no gate``.

On a loaded machine those runs spread by tens of percent, more than the gate
could cost, so ``--micro`` measures the added work itself, in a tight loop:
what the gate adds to each request (``gate.down`` and ``gate.success()``) and
what the router adds to each request (choosing the replica, the sticky map,
the extra coroutine), against replicas that answer at once. Two requests per
rollout turn those into microseconds per rollout, to set beside the ~0.4 ms of
CPU a rollout costs.

    python bench/gate_cost.py --repeats 5 --in-flight 64,1024
    python bench/gate_cost.py --micro
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import time
import timeit
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import _pin, fake_server, run_driver  # noqa: E402

VARIANTS = {
    "no gate": ("off", 1, 256),
    "gate": ("on", 1, 256),
    "gate + router": ("on", 2, 128),
    "gate + router 2x256": ("on", 2, 256),
}


def _micro(repeats: int) -> None:
    from benchmax.client import ChatResult, EndpointGate, HttpModelClient, ReplicaRouter
    from benchmax.envs import Usage

    gate = EndpointGate("http://127.0.0.1:9/v1")
    number = 1_000_000
    bare = min(timeit.repeat("pass", number=number, repeat=repeats))
    step = "gate.down or None\ngate.success()"
    gated = min(timeit.repeat(step, globals={"gate": gate}, number=number, repeat=repeats))
    gate_us = (gated - bare) / number * 1e6

    answer = ChatResult({"role": "assistant", "content": "ok"}, "stop", Usage(1, 1))

    class Instant(HttpModelClient):
        """A replica that answers at once, so only the router's own work is timed."""

        async def chat(self, body, *, rollout_id=None, auth=None, wait=True):  # type: ignore[no-untyped-def]
            return answer

    replicas = [Instant(f"http://127.0.0.{i + 1}:9/v1") for i in range(2)]
    router = ReplicaRouter(replicas)
    body = {"model": "m", "messages": []}
    calls = 200_000
    sticky_ids = [f"eval/{i:064d}#0" for i in range(1024)]
    new_ids = [f"eval/{i:064d}#1" for i in range(calls)]

    async def loop(client: object, ids: list[str]) -> float:
        chat = client.chat  # type: ignore[attr-defined]
        started = time.process_time()
        for index in range(calls):
            await chat(body, rollout_id=ids[index % len(ids)])
        return time.process_time() - started

    def best(client: object, ids: list[str]) -> float:
        return min(asyncio.run(loop(client, ids)) for _ in range(repeats))

    direct = best(replicas[0], sticky_ids)
    sticky = best(router, sticky_ids)
    fresh = best(router, new_ids)
    print("| added work | µs per request | µs per rollout (2 requests) | share of 0.40 ms CPU per rollout |")
    print("|---|---:|---:|---:|")
    for name, seconds in (
        ("gate: `gate.down` + `gate.success()`", gate_us / 1e6 * calls),
        ("router, a rollout's later turn (sticky hit)", sticky - direct),
        ("router, a rollout's first turn (new sticky entry, oldest evicted)", fresh - direct),
    ):
        per_request = seconds / calls * 1e6
        print(f"| {name} | {per_request:.2f} | {2 * per_request:.2f} | {2 * per_request / 400:.2%} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="64,1024")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=4096)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which, comma-separated")
    parser.add_argument("--cores", default="0,1", help="driver core, server core ('none': no pinning)")
    parser.add_argument("--micro", action="store_true", help="time the added work itself, in a tight loop")
    args = parser.parse_args()
    if args.micro:
        _micro(max(3, args.repeats))
        return 0
    driver_core = server_core = None
    if args.cores != "none" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        driver_core, server_core = (int(v) for v in args.cores.split(","))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])}
    figures: dict[tuple[int, str], list[dict[str, object]]] = {}
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(fake_server(args.latency_ms, server_core)) for _ in range(2)]
        for in_flight in (int(value) for value in args.in_flight.split(",")):
            for repeat in range(args.repeats):
                names = [name for name in VARIANTS if name in args.variants.split(",")]
                names = names[repeat % len(names) :] + names[: repeat % len(names)]
                for name in names:
                    gate, replicas, limit = VARIANTS[name]
                    command = [
                        *_pin(driver_core), sys.executable, str(BENCH / "driver_ours.py"), "--gate", gate,
                        "--in-flight", str(in_flight), "--group-size", str(args.group_size),
                        "--rollouts", str(args.rollouts), "--max-requests", str(limit),
                    ]  # fmt: skip
                    for url in servers[:replicas]:
                        command += ["--base-url", url]
                    result = run_driver(command, env, 600)
                    figures.setdefault((in_flight, name), []).append(result)
                    print(
                        f"{name:>19} x{in_flight} #{repeat}: {result['cpu_ms_per_rollout']} ms CPU, "
                        f"{result['rollouts_per_s']} rollouts/s, {result['failures']} failures",
                        file=sys.stderr,
                        flush=True,
                    )
    print("| in flight | variant | CPU ms/rollout (median) | vs no gate | rollouts/s (median) | failures |")
    print("|---:|---|---:|---:|---:|---:|")
    for (in_flight, name), runs in figures.items():
        cpu = statistics.median(float(run["cpu_ms_per_rollout"]) for run in runs)  # type: ignore[arg-type]
        base = statistics.median(
            float(run["cpu_ms_per_rollout"]) for run in figures[(in_flight, "no gate")]  # type: ignore[arg-type]
        )
        speed = statistics.median(float(run["rollouts_per_s"]) for run in runs)  # type: ignore[arg-type]
        failures = sum(int(run["failures"]) for run in runs)  # type: ignore[call-overload]
        print(f"| {in_flight} | {name} | {cpu:.3f} | {cpu / base:.3f} | {speed:,.0f} | {failures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
