"""Drive our engine through the runner, as ``benchmax eval`` does, and print one result line.

The runner schedules groups, the engine runs them and the SQLite store writes
every settled group; the harness samples CPU and loop lag in the same loop.
``--path engine`` bypasses runner and store (``Engine.run_group`` in a closed
loop) to separate the engine's cost from the store's. ``--base-url`` given
twice or more spreads the requests over those replicas (the router);
``--gate off`` swaps each endpoint's health gate for one that does nothing, to
measure what the gate costs (``bench/gate_cost.py``).

    python bench/driver_ours.py --base-url http://127.0.0.1:8000/v1 --in-flight 64
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import tempfile
import time
from pathlib import Path

import _harness
from scenario import AddEnv

from benchmax.client import EndpointGate
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import RolloutOutcome, RolloutRequest
from benchmax.runner import RunConfig, arun


def _reasons(outcomes: tuple[RolloutOutcome, ...] | list[RolloutOutcome]) -> list[str]:
    return [
        "ok"
        if outcome.termination_reason == "finished" and outcome.rewards.get("correct") == 1.0
        else (outcome.termination_reason if outcome.termination_reason != "finished" else "wrong")
        for outcome in outcomes
    ]


class _NoGate(EndpointGate):
    """A gate that is always up and keeps no count: the hot path as if there were no gate."""

    @property
    def down(self) -> bool:
        return False

    def success(self) -> None:
        pass


def _without_gate() -> None:
    import benchmax.client._http as http

    http.EndpointGate = _NoGate  # type: ignore[misc]


class _Observer:
    def __init__(self, recorder: _harness.Recorder) -> None:
        self.recorder = recorder

    def on_start(self, **_: object) -> None:
        pass

    def on_group(self, result: object, *, env: str | None = None) -> None:
        outcomes = result.outcomes  # type: ignore[attr-defined]
        latency = max(o.ended_at for o in outcomes) - min(o.started_at for o in outcomes)
        self.recorder.group_done(latency, _reasons(outcomes))


async def _via_runner(args: argparse.Namespace, recorder: _harness.Recorder, run_dir: Path) -> None:
    groups = args.rollouts // args.group_size
    config = RunConfig(
        env="scenario:AddEnv",
        split="eval",
        max_examples=groups,
        group_size=args.group_size,
        concurrency=args.in_flight,
        model="fake",
        base_url=args.base_url,
        run_dir=run_dir,
        engine=EngineConfig(max_requests=args.max_requests, adapt_requests=not args.fixed_requests),
    )
    await arun(config, env=AddEnv(examples=groups), observer=_Observer(recorder))


async def _via_engine(args: argparse.Namespace, recorder: _harness.Recorder) -> None:
    groups = args.rollouts // args.group_size
    env = AddEnv(examples=groups)
    dataset = list(await env.create_dataset("eval", Path.cwd(), max_examples=groups))
    config = EngineConfig(max_requests=args.max_requests, adapt_requests=not args.fixed_requests)
    engine = Engine(env, config)
    base_url = engine.clients.route(args.base_url)
    try:

        async def run_group(index: int) -> list[str]:
            example = dataset[index]
            requests = [
                RolloutRequest(f"eval/{example.id}#{n}", example, "fake", base_url, split="eval")
                for n in range(args.group_size)
            ]
            return _reasons((await engine.run_group(requests)).outcomes)

        await _harness.closed_loop(
            run_group,
            recorder,
            groups=groups,
            concurrent_groups=max(1, args.in_flight // args.group_size),
        )
    finally:
        await engine.aclose()


async def _main(args: argparse.Namespace) -> dict[str, object]:
    recorder = _harness.Recorder(in_flight=args.in_flight)
    with tempfile.TemporaryDirectory(prefix="benchmax-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        workload = (
            _via_runner(args, recorder, run_dir)
            if args.path == "runner"
            else _via_engine(args, recorder)
        )
        result = await _harness.measure(recorder, workload)
        if args.path == "runner":
            result["store_bytes"] = sum(p.stat().st_size for p in run_dir.iterdir())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, action="append", help="give it again for each replica")
    parser.add_argument("--in-flight", type=int, default=64, help="rollouts in flight")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--path", choices=("runner", "engine"), default="runner")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop instead of asyncio")
    parser.add_argument("--profile", help="write a cProfile of the whole run to this file")
    parser.add_argument("--max-requests", type=int, default=EngineConfig().max_requests,
                        help="requests on the wire per endpoint (each replica)")
    parser.add_argument("--fixed-requests", action="store_true",
                        help="hold --max-requests (no fewer while the loop is saturated: EngineConfig.adapt_requests)")
    parser.add_argument("--gate", choices=("on", "off"), default="on", help="off: a gate that does nothing")
    args = parser.parse_args()
    if args.gate == "off":
        _without_gate()
    started = time.perf_counter()
    runner = asyncio.run
    if args.uvloop:
        import uvloop

        runner = uvloop.run
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    result = runner(_main(args))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    result.update(
        impl="ours", path=args.path, gate=args.gate, replicas=len(args.base_url),
        wall_s=round(time.perf_counter() - started, 2),
    )  # fmt: skip
    _harness.emit(result)
    os._exit(0)


if __name__ == "__main__":
    main()
