"""Benchmark: does a 100k-rollout run open its inspector run page in under a second?

Writes a synthetic run straight through the store writer (no model needed), starts
the inspector on loopback with uvicorn, and times, over real HTTP, the requests the
run page makes when it opens: the page itself, the overview, the first page of the
rollout table, plus a filtered and a sorted table page, a group and a rollout.

    python bench/inspector_bench.py [--rollouts 100000] [--run-dir /tmp/bmx-bench/run]
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from benchmax.envs import Example, LogEntry, RolloutOutcome, TurnRecord, Usage
from benchmax.inspector import create_app
from benchmax.store import GroupWrite, RunWriter

GROUP_SIZE = 4
REASONS = ["finished"] * 90 + ["max_turns_exceeded"] * 6 + ["model_error"] * 3 + ["timeout"]


def write_run(run_dir: Path, rollouts: int, seed: int = 0) -> float:
    """Write ``rollouts`` synthetic rollouts; returns the seconds it took."""
    rng = random.Random(seed)
    started = time.perf_counter()
    writer = RunWriter.create(
        run_dir,
        {
            "status": "completed",
            "created_at": time.time(),
            "model": "bench-model",
            "env_class": "bench.SyntheticEnv",
            "pass_threshold": 1.0,
            "kind": "eval",
        },
    )
    n_examples = rollouts // GROUP_SIZE
    examples = [
        Example(f"ex{i:06d}", {"prompt_messages": [{"role": "user", "content": f"What is {i} + {i}?"}]})
        for i in range(n_examples)
    ]
    writer.add_examples("eval", examples)
    now = time.time()
    for index, example in enumerate(examples):
        outcomes = []
        for sample in range(GROUP_SIZE):
            reason = rng.choice(REASONS)
            answer = str(2 * index if rng.random() < 0.6 else index)
            rewards = (
                {"correct": float(answer == str(2 * index)), "format": rng.choice([0.0, 0.5, 1.0])}
                if reason in ("finished", "max_turns_exceeded")
                else {}
            )
            seconds = rng.lognormvariate(0, 0.6)
            messages = [
                {"role": "user", "content": f"What is {index} + {index}?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "add", "arguments": f'{{"a": {index}, "b": {index}}}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_0", "name": "add", "content": str(2 * index)},
                {"role": "assistant", "content": f"Let me think step by step. {'x' * 300} {answer}"},
            ]
            turns = (
                TurnRecord(0, now, seconds / 2, 0.001, "tool_calls", Usage(40, 12), 1),
                TurnRecord(1, now + seconds / 2, seconds / 2, 0.0, "stop", Usage(60, rng.randint(20, 400))),
            )
            logs = (
                LogEntry(now, "INFO", "bench.env", f"adding {index}+{index}", "env.py", 10, 0, "tools"),
                LogEntry(now, "DEBUG", "bench.env", "scored", "env.py", 20, 1, "reward"),
            )
            outcomes.append(
                RolloutOutcome(
                    rewards=rewards,
                    termination_reason=reason,
                    error=None if rewards else f"{reason}: synthetic failure",
                    rollout_id=f"eval/{example.id}#{sample}",
                    example_id=example.id,
                    split="eval",
                    messages=messages,
                    turns=turns,
                    logs=logs,
                    started_at=now,
                    ended_at=now + seconds,
                )
            )
        writer.write_group(
            GroupWrite(
                group_id=f"eval/{example.id}",
                example_id=example.id,
                example_idx=index,
                batch=index // 1000,
                outcomes=tuple(outcomes),
                sample_indices=tuple(range(GROUP_SIZE)),
                started_at=now,
                ended_at=now + 1,
            )
        )
    writer.flush()
    for batch in writer.batches():
        writer.fill_batch(batch)
    writer.close()
    return time.perf_counter() - started


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:
        pass


def time_page(base: str, run: str, repeats: int) -> dict[str, list[float]]:
    """Time each request the run page makes as it opens (a cold run first, then warm)."""
    quoted = httpx.URL(f"/runs/{run}").raw_path.decode()
    requests = {
        "page html": f"{base}{quoted}",
        "overview": f"{base}/api/runs/{run}/overview",
        "table page 1": f"{base}/api/runs/{run}/rollouts?limit=50",
        "distributions (drawn after)": f"{base}/api/runs/{run}/distributions",
        "progress poll": f"{base}/api/runs/{run}/progress",
        "table sorted by seconds desc": f"{base}/api/runs/{run}/rollouts?sort=seconds&desc=1&limit=50",
        "table filtered (reason+component+text)": (
            f"{base}/api/runs/{run}/rollouts?reason=finished&c=correct&cmin=1&q=step&limit=50"
        ),
        "table last page": f"{base}/api/runs/{run}/rollouts?offset=99950&limit=50",
        "examples page": f"{base}/api/runs/{run}/examples?sort=pass_rate&limit=50",
        "groups with no signal": f"{base}/api/runs/{run}/groups?no_signal=1&limit=50",
        "group": f"{base}/api/runs/{run}/groups/eval/ex012345",
        "rollout": f"{base}/api/runs/{run}/rollouts/" + "eval%2Fex012345%232",
    }
    figures: dict[str, list[float]] = {name: [] for name in requests}
    with httpx.Client(timeout=60) as client:
        for _ in range(repeats):
            for name, url in requests.items():
                clock = time.perf_counter()
                response = client.get(url)
                figures[name].append(time.perf_counter() - clock)
                response.raise_for_status()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--root", type=Path, default=Path("/tmp/bmx-inspector-bench"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    run_dir = args.root / f"synthetic-{args.rollouts}"
    if not (run_dir / "run.sqlite").exists():
        seconds = write_run(run_dir, args.rollouts)
        print(f"wrote {args.rollouts} rollouts in {seconds:.1f}s to {run_dir}")
    size = sum(path.stat().st_size for path in run_dir.iterdir()) / 1e6
    print(f"run store: {size:.0f} MB")

    server = _Server(uvicorn.Config(create_app(args.root), host="127.0.0.1", port=args.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        figures = time_page(f"http://127.0.0.1:{args.port}", run_dir.name, args.repeats)
    finally:
        server.should_exit = True
        thread.join()

    print(f"\n{'request':42} {'cold':>8} {'warm median':>12}")
    for name, values in figures.items():
        warm = statistics.median(values[1:]) if len(values) > 1 else values[0]
        print(f"{name:42} {values[0] * 1000:7.0f}ms {warm * 1000:10.0f}ms")
    opening = ("page html", "overview", "table page 1")
    cold = sum(figures[name][0] for name in opening)
    warm = sum(statistics.median(figures[name][1:] or figures[name]) for name in opening)
    full = cold + figures["distributions (drawn after)"][0]
    print(f"\nrun page open (html + overview + first table page): cold {cold:.3f}s, warm {warm:.3f}s")
    print(f"run page fully drawn (+ latency/token charts, no-signal groups), cold: {full:.3f}s")
    print("PASS" if cold < 1.0 else "FAIL", "(target: the run page opens in under 1 s)")


if __name__ == "__main__":
    main()
