"""Benchmark our engine against benchmax 0.2.5 on the same scenario, side by side.

Each configuration (model latency x rollouts in flight) runs ``--repeats`` times
per implementation, alternating ours and the reference so drift in machine load
hits both alike; every run is a fresh driver process pinned to one core, with
the fake model server (``bench/fake_server.py``) pinned to another. Figures are
medians over the repeats; the ratio column compares ours to the reference on the
same row. See ``bench/README.md`` for what each column means.

    python bench/run.py                    # the full table (about 20 minutes)
    python bench/run.py --no-reference     # ours only
    python bench/run.py --smoke            # a few seconds; what CI runs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
_RESULT = "BENCH_RESULT "
_METRICS = (
    "rollouts_per_s",
    "cpu_ms_per_rollout",
    "peak_rss_mb",
    "group_p50_s",
    "group_p99_s",
    "loop_lag_p99_ms",
    "loop_iteration_cpu_p99_ms",
)


@dataclass
class Cell:
    """The runs of one implementation at one configuration."""

    runs: list[dict[str, object]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def median(self, key: str) -> float | None:
        values = [float(run[key]) for run in self.runs if key in run]  # type: ignore[arg-type]
        return statistics.median(values) if values else None

    @property
    def failures(self) -> int:
        return sum(int(run["failures"]) for run in self.runs)  # type: ignore[call-overload]


def _pin(core: int | None) -> list[str]:
    return ["taskset", "-c", str(core)] if core is not None else []


@contextmanager
def fake_server(latency_ms: float, core: int | None) -> Iterator[str]:
    command = [
        *_pin(core),
        sys.executable,
        str(BENCH / "fake_server.py"),
        "--port",
        "0",
        "--latency-ms",
        str(latency_ms),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def server_stats(base_url: str) -> dict[str, object]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as reply:
        return json.loads(reply.read())


def run_driver(command: list[str], env: dict[str, str], timeout: float) -> dict[str, object]:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"driver ran past {timeout:g}s") from None
    for line in done.stdout.splitlines():
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT) :])
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    raise RuntimeError(f"driver exited {done.returncode} with no result: {' | '.join(tail)}")


def reference_python(setup: bool) -> str | None:
    """The reference venv's interpreter, building the venv when ``setup`` allows."""
    script = BENCH / "reference" / "setup.sh"
    if not setup:
        return None
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"reference unavailable, skipped: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return done.stdout.strip().splitlines()[-1]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(ours: float | None, ref: float | None, *, higher_is_better: bool) -> str:
    if ours is None or ref is None or ours == 0 or ref == 0:
        return "-"
    return f"{(ours / ref if higher_is_better else ref / ours):.1f}x"


def table(cells: dict[tuple[float, int, str], Cell], args: argparse.Namespace) -> str:
    lines = [
        "| latency | in flight | impl | rollouts/s | CPU ms/rollout | peak RSS MB | failures "
        "| group p50 s | group p99 s | loop lag p99 ms | loop iteration CPU p99 ms | vs reference (speed, CPU, RSS) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for latency in args.latencies:
        for in_flight in args.in_flight:
            ours = cells.get((latency, in_flight, "ours"))
            ref = cells.get((latency, in_flight, "reference"))
            for name, cell in (("ours", ours), ("reference", ref)):
                if cell is None:
                    continue
                ratio = ""
                if name == "ours" and ref is not None and ref.runs:
                    ratio = ", ".join(
                        _ratio(cell.median(key), ref.median(key), higher_is_better=better)
                        for key, better in (
                            ("rollouts_per_s", True),
                            ("cpu_ms_per_rollout", False),
                            ("peak_rss_mb", False),
                        )
                    )
                errors = f" ({len(cell.errors)} runs crashed)" if cell.errors else ""
                lines.append(
                    f"| {latency:g} ms | {in_flight} | {name} | {_fmt(cell.median('rollouts_per_s'))} "
                    f"| {_fmt(cell.median('cpu_ms_per_rollout'), 2)} | {_fmt(cell.median('peak_rss_mb'))} "
                    f"| {cell.failures}{errors} | {_fmt(cell.median('group_p50_s'), 3)} "
                    f"| {_fmt(cell.median('group_p99_s'), 3)} | {_fmt(cell.median('loop_lag_p99_ms'))} "
                    f"| {_fmt(cell.median('loop_iteration_cpu_p99_ms'))} | {ratio} |"
                )
    return "\n".join(lines)


def _rollouts(in_flight: int, waves: int, minimum: int, group_size: int) -> int:
    total = max(waves * in_flight, minimum)
    return total - total % group_size


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0,50", help="model latencies in ms, comma-separated")
    parser.add_argument("--in-flight", default="64,256,1024", help="rollouts in flight, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--waves", type=int, default=4, help="ours: rollouts per run = waves x in flight")
    parser.add_argument("--min-rollouts", type=int, default=2048)
    parser.add_argument("--ref-waves", type=int, default=3)
    parser.add_argument("--ref-min-rollouts", type=int, default=512)
    parser.add_argument("--path", choices=("runner", "engine"), default="runner",
                        help="ours through the runner and store (what users run) or the bare engine")
    parser.add_argument("--uvloop", action="store_true", help="run our driver on uvloop")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--cores", default="0,1", help="driver core, server core ('none': no pinning)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per driver run")
    parser.add_argument("--json", help="also write every run's raw figures here")
    parser.add_argument("--smoke", action="store_true", help="tiny, ours only: CI's check")
    args = parser.parse_args(argv)
    if args.smoke:
        args.latencies, args.in_flight, args.repeats = "0", "16", 1
        args.group_size, args.waves, args.min_rollouts = 4, 4, 64
        args.no_reference = True
    args.latencies = [float(v) for v in args.latencies.split(",")]
    args.in_flight = [int(v) for v in args.in_flight.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    driver_core = server_core = None
    if args.cores != "none" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        driver_core, server_core = (int(v) for v in args.cores.split(","))
    else:
        print("not pinning to cores (taskset missing, one core, or --cores none)", file=sys.stderr)
    ref_python = reference_python(setup=not args.no_reference)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])}
    cells: dict[tuple[float, int, str], Cell] = {}
    raw: list[dict[str, object]] = []
    for latency in args.latencies:
        with fake_server(latency, server_core) as base_url:
            for in_flight in args.in_flight:
                for repeat in range(args.repeats):
                    impls = ["ours", "reference"] if ref_python else ["ours"]
                    if repeat % 2:
                        impls.reverse()
                    for impl in impls:
                        if impl == "ours":
                            rollouts = _rollouts(in_flight, args.waves, args.min_rollouts, args.group_size)
                            command = [sys.executable, str(BENCH / "driver_ours.py"), "--path", args.path]
                            if args.uvloop:
                                command.append("--uvloop")
                        else:
                            rollouts = _rollouts(
                                in_flight, args.ref_waves, args.ref_min_rollouts, args.group_size
                            )
                            command = [str(ref_python), str(BENCH / "reference" / "driver.py")]
                        command = [
                            *_pin(driver_core),
                            *command,
                            "--base-url",
                            base_url,
                            "--in-flight",
                            str(in_flight),
                            "--group-size",
                            str(args.group_size),
                            "--rollouts",
                            str(rollouts),
                        ]
                        cell = cells.setdefault((latency, in_flight, impl), Cell())
                        started = time.perf_counter()
                        try:
                            result = run_driver(command, env, args.timeout)
                        except RuntimeError as exc:
                            cell.errors.append(str(exc))
                            print(f"{impl} {latency:g}ms x{in_flight} #{repeat}: {exc}", file=sys.stderr)
                            continue
                        result.update(latency_ms=latency, in_flight=in_flight, repeat=repeat)
                        cell.runs.append(result)
                        raw.append(result)
                        print(
                            f"{impl:>9} {latency:g}ms x{in_flight} #{repeat}: "
                            f"{result['rollouts_per_s']} rollouts/s, "
                            f"{result['cpu_ms_per_rollout']} ms CPU, {result['peak_rss_mb']} MB, "
                            f"{result['failures']} failures "
                            f"({time.perf_counter() - started:.1f}s)",
                            file=sys.stderr,
                            flush=True,
                        )
            stats = server_stats(base_url)
            print(f"fake server at {latency:g} ms: {json.dumps(stats)}", file=sys.stderr)
    pinning = f"driver on core {driver_core}, server on core {server_core}" if driver_core is not None else "unpinned"
    print(
        f"\n{args.path} path, group size {args.group_size}, medians of {args.repeats}, {pinning}; "
        "failures are totals over the repeats\n"
    )
    print(table(cells, args))
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    crashed = any(cell.errors for cell in cells.values())
    failed = any(cell.failures for key, cell in cells.items() if key[2] == "ours")
    return 1 if crashed or failed else 0


if __name__ == "__main__":
    sys.exit(main())
