"""What a mixture costs the driver: CPU ms per rollout for a mixture of 3 envs against one env.

Both variants run the same workload through the runner and the store, as ``benchmax eval``
does (``driver_ours.py``'s runner path, against ``fake_server.py`` at 0 ms): ``AddEnv`` alone, and
an ``EnvMix`` of three ``AddEnv``s (a third of the examples each), so the only difference is the
mixture: its dataset (namespaced ids, ``Example.env``), the routing of each group to its member's
engine and the remapping of its outcomes. Runs alternate (one, mix, one, mix, ...) so drift in the
machine's load hits both alike; each is measured over its steady-state window (``_harness``).
Prints each run, the medians and the ratio mix / one (goal: within 10%, issue #33).

    python bench/mix_overhead.py --rollouts 4096 --in-flight 256 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import _harness  # noqa: E402
from driver_ours import _Observer  # noqa: E402
from run import fake_server  # noqa: E402
from scenario import AddEnv  # noqa: E402

from benchmax.engine import EngineConfig  # noqa: E402
from benchmax.mix import EnvMix, MixMember  # noqa: E402
from benchmax.runner import RunConfig, arun  # noqa: E402


async def _one_run(variant: str, base_url: str, args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    groups = args.rollouts // args.group_size
    if variant == "one":
        env: object = AddEnv(examples=groups)
    else:
        env = EnvMix([MixMember(name, AddEnv(examples=groups // 3)) for name in ("a", "b", "c")])
    config = RunConfig(
        env=f"bench:{variant}",
        split="eval",
        group_size=args.group_size,
        concurrency=args.in_flight,
        model="fake",
        base_url=base_url,
        run_dir=tmp / f"{variant}-{id(env)}",
        engine=EngineConfig(),
    )
    recorder = _harness.Recorder(in_flight=args.in_flight)
    return await _harness.measure(recorder, arun(config, env=env, observer=_Observer(recorder)))  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=4096)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"one": [], "mix": []}
    with fake_server(0.0, None) as base_url, tempfile.TemporaryDirectory(prefix="benchmax-mix-") as tmp:
        for repeat in range(args.repeats):
            for variant in ("one", "mix"):
                result = asyncio.run(_one_run(variant, base_url, args, Path(tmp)))
                figures[variant].append(float(result["cpu_ms_per_rollout"]))  # type: ignore[arg-type]
                print(
                    f"run {repeat + 1} {variant:>3}: {result['cpu_ms_per_rollout']} ms CPU/rollout, "
                    f"{result['rollouts_per_s']} rollouts/s, {result['failures']} failures",
                    flush=True,
                )
    one, mix = statistics.median(figures["one"]), statistics.median(figures["mix"])
    print(f"median CPU ms per rollout at {args.in_flight} in flight: one env {one:.3f}, mixture of 3 {mix:.3f}")
    print(f"mix / one: {mix / one:.3f}")


if __name__ == "__main__":
    main()
