"""Synchronous vs async generation on the CPU demo, side by side in one run (prints figures).

Each mode trains the same config from the same seed in a fresh process:
``sync`` generates each step's rollouts when the trainer asks
(``--async-steps 0``), ``async`` generates step k+1 while step k trains
(``--async-steps 1``, importance-corrected). The modes alternate (the order
flips per repeat) so drift in machine load hits both. Printed: steps per minute
of the training loop (load, probe and eval excluded), the rollouts and completion
tokens each run generated (a step's time follows them: refills of dead groups differ by run),
milliseconds per completion token, both ratios, the reward of
every rollout generated per step (the curve), the IS ratio and staleness::

    nice -n 10 python bench/train_async.py --steps 10 -- examples/math \\
        --env-arg worked_examples=2 --group-size 8 --prompts-per-step 2 --max-tokens 40 \\
        --learning-rate 1e-4 --train-layers 6 --threads 2

Everything after ``--`` is passed to ``benchmax train`` for both modes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODES = {"sync": ["--async-steps", "0"], "async": ["--async-steps", "1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/benchmax-train-async"))
    parser.add_argument("--component", default=None, help="the component to show per step (default: all)")
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = [arg for arg in args.train_args if arg != "--"]
    from benchmax.store import Run

    rows = []
    for repeat in range(args.repeats):
        order = list(MODES) if repeat % 2 == 0 else list(reversed(MODES))
        for mode in order:
            run_dir = args.out / f"{mode}-{repeat}-{int(time.time())}"
            load = os.getloadavg()[0]
            command = [
                sys.executable, "-m", "benchmax.cli", "train", *extra, *MODES[mode],
                "--max-steps", str(args.steps), "--save-steps", "100000", "--run-dir", str(run_dir),
            ]  # fmt: skip
            print(f"[{mode} #{repeat}] load {load:.2f}: {' '.join(command[3:])}", flush=True)
            completed = subprocess.run(command, capture_output=True, text=True, check=False)
            if completed.returncode != 0:
                print(completed.stdout[-3000:], completed.stderr[-3000:])
                raise SystemExit(f"{mode} failed")
            with Run(run_dir) as run:
                steps = run.steps()
                seconds = float(run.meta.get("train_seconds") or 0.0)
                work = _work(run)
            rows.append((mode, repeat, steps, seconds, load, os.getloadavg()[0], work))
    print()
    print(
        "| mode | steps | train s | steps/min | rollouts | completion tokens | ms/token"
        " | mean reward (all rollouts) | IS ratio min-max | staleness | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    per_token: dict[str, list[float]] = {mode: [] for mode in MODES}
    for mode, repeat, steps, seconds, start, end, (rollouts, tokens) in rows:
        rewards = [metrics.get("generated/reward", 0.0) for _, _, metrics in steps]
        low = min((metrics.get("is_ratio/min", 1.0) for _, _, metrics in steps), default=1.0)
        high = max((metrics.get("is_ratio/max", 1.0) for _, _, metrics in steps), default=1.0)
        stale = max((metrics.get("policy/staleness_max", 0.0) for _, _, metrics in steps), default=0.0)
        rate = 60 * len(steps) / seconds if seconds else float("nan")
        rates[mode].append(rate)
        milliseconds = 1000 * seconds / tokens if tokens else float("nan")
        per_token[mode].append(milliseconds)
        mean = sum(rewards) / max(1, len(rewards))
        print(
            f"| {mode} #{repeat} | {len(steps)} | {seconds:.0f} | {rate:.2f} | {rollouts} | {tokens}"
            f" | {milliseconds:.1f} | {mean:.3f} | {low:.2f}-{high:.2f} | {stale:g} | {start:.1f}-{end:.1f} |"
        )
    print()
    for mode, repeat, steps, _, _, _, _ in rows:
        names = sorted({key for _, _, m in steps for key in m if key.startswith("generated/")})
        if args.component:
            names = [f"generated/{args.component}"]
        for name in names:
            curve = " ".join(f"{metrics.get(name, float('nan')):.2f}" for _, _, metrics in steps)
            print(f"{mode} #{repeat} {name.removeprefix('generated/')} per step: {curve}")
    ratios = [a / s for a, s in zip(rates["async"], rates["sync"], strict=False)]
    print("async / sync steps per minute: " + ", ".join(f"{ratio:.2f}x" for ratio in ratios))
    # a step's time follows its work (dead-group refills, turns, tokens), which differs by run
    speed = [s / a for a, s in zip(per_token["async"], per_token["sync"], strict=False)]
    print("async / sync completion tokens per second: " + ", ".join(f"{ratio:.2f}x" for ratio in speed))


def _work(run: Any) -> tuple[int, int]:
    """The training rollouts a run generated and their completion tokens (refills included)."""
    rollouts = tokens = 0
    for rollout in run.rollouts():
        if rollout.split == "train":
            rollouts += 1
            tokens += rollout.completion_tokens or 0
    return rollouts, tokens


if __name__ == "__main__":
    main()
