"""Fault drill at full size: 10,000 rollouts at 1,000 in flight against a misbehaving server.

Every request independently draws a fault from the issue's mix (10% 503, 5% 429
with ``Retry-After: 1``, 2% connection resets, 1% hangs past the request
timeout, 1% malformed JSON, 1% truncated bodies), from a seeded hash so the run
is reproducible. The drill runs twice over the same dataset and prints one JSON
object per pass, then the invariants it checked. The test suite runs the same
drill (``tests/reliability/test_fault_injection.py``).

    python bench/faults.py --rollouts 10000 --in-flight 1000
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability" / "support"))

from faultkit import FaultPolicy, drill, open_fds, rss_mb

from benchmax.testing import ScriptedServer


async def _main(args: argparse.Namespace) -> int:
    policy = FaultPolicy(seed=args.seed, hang=args.hang)
    with ScriptedServer(policy=policy, keep_requests=0) as server, tempfile.TemporaryDirectory() as tmp:
        fds = open_fds()
        rss_start = rss_mb()
        passes = []
        for number in (1, 2):
            policy.reset(f"pass-{number}")
            figures = await drill(
                server.base_url,
                policy,
                Path(tmp) / f"run{number}",
                rollouts=args.rollouts,
                in_flight=args.in_flight,
                request_timeout=args.request_timeout,
            )
            passes.append(figures)
            print(json.dumps({"pass": number, **dataclasses.asdict(figures), "recovery": figures.recovery}))
        first, second = passes
        checks = {
            "every rollout stored once": all(f.stored == f.distinct_ids == f.rollouts for f in passes),
            "recovery >= 99%": all(f.recovery >= 0.99 for f in passes),
            "no tasks left": all(f.tasks_left == 0 for f in passes),
            "contexts balanced": all(f.contexts == (f.rollouts, f.rollouts) for f in passes),
            "fds back to baseline": all(f.fds[1] <= f.fds[0] for f in passes) and open_fds() <= fds,
            "rss growth on pass 2 (MB)": round(second.rss_mb - first.rss_mb, 1),
            "rss growth from start (MB)": round(second.rss_mb - rss_start, 1),
        }
        print(json.dumps(checks))
    return 0 if all(value for value in checks.values() if isinstance(value, bool)) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--in-flight", type=int, default=1_000)
    parser.add_argument("--request-timeout", type=float, default=3.0)
    parser.add_argument("--hang", type=float, default=6.0, help="Seconds a hung request stays silent.")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    sys.exit(asyncio.run(_main(args)))


if __name__ == "__main__":
    main()
