"""A big run through the CLI, and every figure of issue 19 on it.

Builds an N-rollout run with ``benchmax eval`` (``bench/scenario.py:AddEnv``, groups
of 4, against ``bench/fake_server.py``), stops it just before the end and resumes
it, then measures on the finished run: resume with nothing to do, each inspector
API call cold (a fresh server per call) and warm, the JSON Lines and Parquet
exports, a rescore with the scenario's cheap reward and one with a judge-like
reward, and the store's bytes per rollout. A last, smaller eval holds the
database's write lock for a while mid-run to show the writer's back-pressure.
Every step is a real CLI subprocess; figures are printed, never asserted.

    python bench/scale.py --rollouts 200000          # ~5 minutes on 2 cores
    nice python bench/scale.py --rollouts 1000000    # the issue's scenario
    python bench/scale.py --smoke                    # seconds; what CI runs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
GROUP = 4


SRC = ROOT / "src"


def _env() -> dict[str, str]:
    paths = [str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "benchmax.cli", *(str(arg) for arg in args)]


def _rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of ``pid``; ``RssAnon`` leaves out mapped file pages (a reader's mapped run file)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def _stored(db: Path) -> int | None:
    """Rollouts stored so far (cheap on either store layout)."""
    if not db.exists():
        return None
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            try:
                return conn.execute("SELECT COALESCE(SUM(rollouts), 0) FROM batches").fetchone()[0]
            except sqlite3.OperationalError:
                return conn.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM rollouts").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return None


class Watched:
    """A subprocess whose RSS (and the run's stored rollouts) is sampled while it runs."""

    def __init__(self, command: list[str], log: Path, db: Path | None = None, period: float = 0.5) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
        self.db = db
        self.samples: list[tuple[float, float | None, int | None]] = []
        self._period = period
        self.peak_rss_mb = 0.0
        self.peak_anon_mb = 0.0
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        """User and system CPU of the process and the children it waited for (less disturbed by
        other jobs on the machine than ``seconds``)."""
        self.returncode: int | None = None
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def running(self) -> bool:
        """Whether the process still runs (without reaping it: ``wait`` reads its rusage)."""
        if self.returncode is not None:
            return False
        try:
            return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:  # reaped by wait() meanwhile
            return False

    def _sample(self) -> None:
        while self.running():
            rss = _rss_mb(self.process.pid)
            anon = _rss_mb(self.process.pid, "RssAnon")
            stored = _stored(self.db) if self.db is not None else None
            self.samples.append((time.perf_counter() - self.started, rss, stored))
            self.peak_anon_mb = max(self.peak_anon_mb, anon or 0.0)
            time.sleep(self._period)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"{self.process.args} ran past {timeout}s")
            time.sleep(0.01)
        self.seconds = time.perf_counter() - self.started
        self.cpu_seconds = usage.ru_utime + usage.ru_stime
        self._thread.join()
        self.returncode = os.waitstatus_to_exitcode(status)
        self.process.returncode = self.returncode
        self.peak_rss_mb = max(usage.ru_maxrss / 1024, *(rss or 0 for _, rss, _ in self.samples), 0)
        return self.returncode


@contextlib.contextmanager
def fake_server(latency_ms: float = 0.0) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        process.terminate()
        process.wait(10)


def server_completions(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=5) as reply:
        return int(json.loads(reply.read())["completions"])


def _window_rate(samples: list[tuple[float, float | None, int | None]], low: int, high: int) -> float | None:
    """Rollouts per second while the stored count went from ``low`` to ``high``."""
    points = [(t, n) for t, _, n in samples if n is not None]
    start = next((t for t, n in points if n >= low), None)
    end = next((t for t, n in points if n >= high), None)
    if start is None or end is None or end <= start:
        return None
    first_n = next(n for t, n in points if t >= start)
    last_n = next(n for t, n in points if t >= end)
    return (last_n - first_n) / (end - start)


MIX_NAMES = "abcdefghij"


def env_args(examples: int, mix: int) -> list[object]:
    """``benchmax eval``'s env arguments: the scenario alone, or a mixture of ``mix`` copies of it
    (named a, b, c, ...) sharing ``examples`` between them."""
    if not mix:
        return ["bench/scenario.py:AddEnv", "--env-arg", f"examples={examples}"]
    names = MIX_NAMES[:mix]
    result: list[object] = [f"{name}=bench/scenario.py:AddEnv" for name in names]
    for position, name in enumerate(names):
        share = examples // mix + (1 if position < examples % mix else 0)
        result += ["--env-arg", f"{name}:examples={share}"]
    return result


def build(args: argparse.Namespace, run_dir: Path, base_url: str, figures: dict[str, Any]) -> None:
    """The run through ``benchmax eval``, stopped just before its end and resumed."""
    n = args.rollouts
    eval_args = [
        "eval", *env_args(n // GROUP, args.mix), "--group-size", GROUP,
        "--concurrency", args.concurrency, "--base-url", base_url, "--run-dir", run_dir,
    ]  # fmt: skip
    stop_at = n - max(4 * args.concurrency, n // 50)
    watched = Watched(_cli(*eval_args), args.root / "eval.log", run_dir / "run.sqlite")
    while watched.running():
        stored = _stored(run_dir / "run.sqlite") or 0
        if stored >= stop_at:
            watched.process.send_signal(signal.SIGTERM)
            break
        time.sleep(0.2)
    watched.wait()
    stored = _stored(run_dir / "run.sqlite") or 0
    window = max(GROUP, min(100_000, stop_at // 5))
    figures["eval"] = {
        "rollouts": stored,
        "seconds": round(watched.seconds, 1),
        "rollouts_per_s": round(stored / watched.seconds, 1),
        "first_window": window,
        "first_window_per_s": _round(_window_rate(watched.samples, 0, window)),
        "last_window_per_s": _round(_window_rate(watched.samples, stored - window, stored)),
        "peak_rss_mb": round(watched.peak_rss_mb, 1),
        "peak_anon_mb": round(watched.peak_anon_mb, 1),
        "rss_mb_at": _rss_profile(watched.samples, n),
        "exit_on_sigterm": watched.returncode,
    }
    before = server_completions(base_url)
    resumed = Watched(
        _cli("eval", "--resume", run_dir, "--no-progress"), args.root / "resume.log", run_dir / "run.sqlite"
    )
    first_request = None
    while resumed.running():
        if first_request is None and server_completions(base_url) > before:
            first_request = time.perf_counter() - resumed.started
        time.sleep(0.01)
    code = resumed.wait()
    if code != 0:
        raise RuntimeError(f"resume exited {code}: see {args.root / 'resume.log'}")
    figures["resume_to_first_request_s"] = _round(first_request, 2)
    figures["resume_interrupted_total_s"] = round(resumed.seconds, 1)
    figures["resume_peak_rss_mb"] = round(resumed.peak_rss_mb, 1)
    figures["rollouts"] = _stored(run_dir / "run.sqlite")


def _rss_profile(samples: list[tuple[float, float | None, int | None]], n: int) -> dict[str, float]:
    """RSS when the stored count first reached each tenth of the run."""
    result: dict[str, float] = {}
    for tenth in range(1, 11):
        mark = n * tenth // 10
        rss = next((rss for _, rss, stored in samples if stored is not None and stored >= mark and rss), None)
        if rss is not None:
            result[f"{tenth * 10}%"] = round(rss, 1)
    return result


def resume_nothing(args: argparse.Namespace, run_dir: Path, base_url: str, figures: dict[str, Any]) -> None:
    # the server's URL is given: a --reuse'd run recorded the port of an earlier fake server
    times = []
    cpu = []
    for _ in range(args.repeats):
        command = _cli("eval", "--resume", run_dir, "--no-progress", "--base-url", base_url)
        watched = Watched(command, args.root / "resume-nothing.log")
        if watched.wait() != 0:
            raise RuntimeError(f"resume exited {watched.returncode}: see {args.root / 'resume-nothing.log'}")
        times.append(watched.seconds)
        cpu.append(watched.cpu_seconds)
    figures["resume_nothing_to_do_s"] = round(min(times), 2)
    figures["resume_nothing_to_do_all_s"] = [round(t, 2) for t in times]
    figures["resume_nothing_to_do_cpu_s"] = [round(t, 2) for t in cpu]


def _inspector(run_dir: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        _cli("inspect", run_dir, "--port", "0", "--no-browser"),
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"(http://[^\s?]+?)/?(?:\?token=(\S+))?$", line.strip())
    if not match:
        process.kill()
        raise RuntimeError(f"inspector did not start: {line!r}")
    _TOKEN[:] = [match.group(2)] if match.group(2) else []  # an inspector with a token prints it in its link
    return process, match.group(1)


_TOKEN: list[str] = []
"""The running inspector's token, sent as ``Authorization: Bearer`` (older trees print none)."""


def _get(url: str) -> float:
    clock = time.perf_counter()
    headers = {"Authorization": f"Bearer {urllib.parse.unquote(_TOKEN[0])}"} if _TOKEN else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as reply:
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{url}: HTTP {reply.status}")
    return time.perf_counter() - clock


def inspector_calls(run_dir: Path, compare_with: Path | None, mix: int = 0) -> dict[str, str]:
    conn = sqlite3.connect(f"{(run_dir / 'run.sqlite').resolve().as_uri()}?mode=ro", uri=True)
    try:
        groups = conn.execute("SELECT COUNT(*) FROM groups").fetchone()[0]
        group_id, example_id = conn.execute(
            "SELECT group_id, example_id FROM groups ORDER BY example_idx LIMIT 1 OFFSET ?", (groups // 2,)
        ).fetchone()
        rollouts = conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
    finally:
        conn.close()
    quote = urllib.request.quote
    run = quote(run_dir.name, safe="")
    api = f"/api/runs/{run}"
    calls = {
        "runs list": "/api/runs",
        "overview (component histograms, reasons)": f"{api}/overview",
        "distributions (latency, tokens, no-signal)": f"{api}/distributions",
        "progress poll": f"{api}/progress",
        "rollouts page 1": f"{api}/rollouts?limit=50",
        "rollouts last page": f"{api}/rollouts?limit=50&offset={max(0, rollouts - 50)}",
        "rollouts sorted by reward desc": f"{api}/rollouts?sort=reward&desc=1&limit=50",
        "rollouts sorted by seconds desc": f"{api}/rollouts?sort=seconds&desc=1&limit=50",
        "rollouts sorted by component": f"{api}/rollouts?sort=c:correct&desc=1&limit=50",
        "rollouts filtered reason+component": f"{api}/rollouts?reason=finished&c=correct&cmin=1&limit=50",
        "rollouts failed only": f"{api}/rollouts?failed=1&limit=50",
        "rollouts of one example": f"{api}/rollouts?example={quote(example_id, safe='')}&limit=50",
        "search answers (rare word)": f"{api}/rollouts?q=1000007&limit=50",
        "search transcripts (common word)": f"{api}/rollouts?q=add&transcript=1&limit=50",
        "examples by pass rate": f"{api}/examples?sort=pass_rate&limit=50",
        "examples page 1": f"{api}/examples?limit=50",
        "groups with no signal": f"{api}/groups?no_signal=1&limit=50",
        "groups sorted by std": f"{api}/groups?sort=std&desc=1&limit=50",
        "group": f"{api}/groups/{quote(group_id, safe='')}",
        "rollout": f"{api}/rollouts/{quote(group_id + '#2', safe='')}",
    }
    if mix:
        env = MIX_NAMES[mix - 1]
        calls["rollouts of one env"] = f"{api}/rollouts?env={env}&limit=50"
        calls["examples of one env"] = f"{api}/examples?env={env}&limit=50"
        calls["groups of one env"] = f"{api}/groups?env={env}&limit=50"
    if compare_with is not None:
        calls["compare with the rescored run"] = f"/api/compare?a={run}&b={quote(compare_with.name, safe='')}&limit=50"
    return calls


def inspector(args: argparse.Namespace, root: Path, run_dir: Path, figures: dict[str, Any]) -> None:
    calls = inspector_calls(run_dir, figures.get("rescored_dir") and Path(figures["rescored_dir"]), args.mix)
    results: dict[str, dict[str, float]] = {}
    shared = None
    try:
        for name, path in calls.items():
            if args.cold_per_call or shared is None:
                if args.cold_per_call and shared is not None:
                    _stop(shared[0])
                shared = _inspector(root, args.root / "inspector.log")
            _, base = shared
            figures["inspector"] = results
            cold = _get(base + path)
            warm = [_get(base + path) for _ in range(args.repeats)]
            results[name] = {"cold_s": round(cold, 3), "warm_s": round(statistics.median(warm), 3)}
    finally:
        if shared is not None:
            _stop(shared[0])
    figures["inspector"] = results


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def exports(args: argparse.Namespace, run_dir: Path, figures: dict[str, Any]) -> None:
    n = figures["rollouts"]
    for fmt in args.export_formats.split(","):
        output = args.root / f"export.{fmt}"
        watched = Watched(_cli("export", run_dir, "--format", fmt, "--output", output), args.root / f"export-{fmt}.log")
        if watched.wait() != 0:
            raise RuntimeError(f"export {fmt} exited {watched.returncode}")
        figures[f"export_{fmt}"] = {
            "seconds": round(watched.seconds, 2),
            "cpu_seconds": round(watched.cpu_seconds, 2),
            "rollouts_per_s": round(n / watched.seconds),
            "peak_rss_mb": round(watched.peak_rss_mb, 1),
            "peak_anon_mb": round(watched.peak_anon_mb, 1),
            "bytes": output.stat().st_size,
        }
        output.unlink()


def rescore(args: argparse.Namespace, root: Path, run_dir: Path, figures: dict[str, Any]) -> None:
    n = figures["rollouts"]
    target = root / f"{run_dir.name}-rescored"
    shutil.rmtree(target, ignore_errors=True)
    command = ["rescore", run_dir, "--run-dir", target]
    if args.workers:
        command += ["--workers", args.workers]
    watched = Watched(_cli(*command), args.root / "rescore.log")
    if watched.wait() != 0:
        raise RuntimeError(f"rescore exited {watched.returncode}: see {args.root / 'rescore.log'}")
    figures["rescore"] = {
        "seconds": round(watched.seconds, 1),
        "rollouts_per_s": round(n / watched.seconds),
        "workers": args.workers or "default",
        "peak_rss_mb": round(watched.peak_rss_mb, 1),
    }
    figures["rescored_dir"] = str(target)


def judge_rescore(args: argparse.Namespace, base_url: str, figures: dict[str, Any]) -> None:
    """A small run rescored with a reward that calls a model (the fake server at 50 ms)."""
    n = args.judge_rollouts
    source = args.root / "judged"
    target = args.root / "judged-rescored"
    for path in (source, target):
        shutil.rmtree(path, ignore_errors=True)
    built = Watched(
        _cli("eval", "bench/scenario.py:AddEnv", "--env-arg", f"examples={n // GROUP}", "--group-size", GROUP,
             "--base-url", base_url, "--run-dir", source, "--no-progress"),
        args.root / "judged-eval.log",
    )  # fmt: skip
    if built.wait() != 0:
        raise RuntimeError("the judged run's eval failed")
    with fake_server(latency_ms=args.judge_latency_ms) as judge:
        os.environ["BENCH_JUDGE_URL"] = judge
        try:
            command = ["rescore", source, "bench/scenario.py:JudgedAddEnv", "--run-dir", target, "--workers", 1,
                       "--concurrency", args.judge_concurrency]  # fmt: skip
            watched = Watched(_cli(*command), args.root / "judged-rescore.log")
            if watched.wait() != 0:
                raise RuntimeError(f"judged rescore exited {watched.returncode}")
            calls = server_completions(judge)
        finally:
            os.environ.pop("BENCH_JUDGE_URL", None)
    bound = args.judge_concurrency * GROUP / (args.judge_latency_ms / 1000)
    figures["judge_rescore"] = {
        "rollouts": n,
        "judge_calls": calls,
        "latency_ms": args.judge_latency_ms,
        "concurrency_groups": args.judge_concurrency,
        "seconds": round(watched.seconds, 1),
        "rollouts_per_s": round(n / watched.seconds),
        "bound_rollouts_per_s": round(bound),
    }


def store_size(run_dir: Path, figures: dict[str, Any]) -> None:
    size = sum(path.stat().st_size for path in run_dir.iterdir() if path.name.startswith("run.sqlite"))
    figures["store_bytes"] = size
    figures["store_bytes_per_rollout"] = round(size / figures["rollouts"], 1)


def backpressure(args: argparse.Namespace, base_url: str, figures: dict[str, Any]) -> None:
    """An eval whose database is write-locked by another process for a while, mid-run."""
    n = args.stall_rollouts
    run_dir = args.root / "stalled"
    shutil.rmtree(run_dir, ignore_errors=True)
    watched = Watched(
        _cli("eval", "bench/scenario.py:AddEnv", "--env-arg", f"examples={n // GROUP}", "--group-size", GROUP,
             "--concurrency", args.concurrency, "--base-url", base_url, "--run-dir", run_dir, "--no-progress"),
        args.root / "stalled.log",
        run_dir / "run.sqlite",
        period=0.1,
    )  # fmt: skip
    while (_stored(run_dir / "run.sqlite") or 0) < n // 4:
        if not watched.running():
            raise RuntimeError("the stalled eval ended before the stall")
        time.sleep(0.05)
    lock = sqlite3.connect(run_dir / "run.sqlite", timeout=30, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    t0 = time.perf_counter() - watched.started
    before_rss = _rss_mb(watched.process.pid) or 0.0
    requests_before = server_completions(base_url)
    time.sleep(args.stall_seconds)
    requests_during = server_completions(base_url) - requests_before
    rss_during = max((rss or 0 for t, rss, _ in watched.samples if t >= t0), default=0.0)
    lock.execute("COMMIT")
    lock.close()
    if watched.wait() != 0:
        raise RuntimeError(f"the stalled eval exited {watched.returncode}: see {args.root / 'stalled.log'}")
    figures["backpressure"] = {
        "rollouts": n,
        "stall_seconds": args.stall_seconds,
        "model_requests_during_stall": requests_during,
        "rss_mb_before_stall": round(before_rss, 1),
        "peak_rss_mb_during_stall": round(rss_during, 1),
        "completed": _stored(run_dir / "run.sqlite"),
    }
    shutil.rmtree(run_dir, ignore_errors=True)


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def report(figures: dict[str, Any]) -> str:
    lines = [f"\n## {figures['rollouts']:,} rollouts ({figures['rollouts'] // GROUP:,} examples x {GROUP})\n"]
    rows: list[tuple[str, str]] = []
    ev = figures.get("eval")
    if ev:
        window = f"{ev['first_window']:,}"
        rows += [
            ("eval throughput (to the stop)", f"{ev['rollouts_per_s']:,}/s ({ev['rollouts']:,}, {ev['seconds']} s)"),
            (f"eval first / last {window}", f"{ev['first_window_per_s']} / {ev['last_window_per_s']} rollouts/s"),
            ("driver peak RSS", f"{ev['peak_rss_mb']} MB ({ev['peak_anon_mb']} MB not file-mapped)"),
            ("driver RSS at 10%..100%", ", ".join(f"{k} {v}" for k, v in ev["rss_mb_at"].items())),
            ("resume (interrupted run): to the first new request", f"{figures.get('resume_to_first_request_s')} s"),
        ]  # fmt: skip
    if "resume_nothing_to_do_s" in figures:
        rows.append(
            (
                "resume (finished run): to 'nothing to do'",
                f"{figures['resume_nothing_to_do_s']} s (best of {len(figures['resume_nothing_to_do_all_s'])});"
                f" CPU {figures.get('resume_nothing_to_do_cpu_s')} s",
            )
        )
    if "store_bytes_per_rollout" in figures:
        rows.append(
            (
                "store size",
                f"{figures['store_bytes_per_rollout']} bytes/rollout ({figures['store_bytes'] / 1e9:.2f} GB)",
            )
        )
    for fmt in ("jsonl", "parquet"):
        if f"export_{fmt}" in figures:
            item = figures[f"export_{fmt}"]
            rows.append(
                (
                    f"export {fmt}",
                    f"{item['rollouts_per_s']:,} rollouts/s ({item['seconds']} s, CPU {item.get('cpu_seconds')} s,"
                    f" peak RSS {item['peak_rss_mb']} MB,"
                    f" of which not the mapped run file {item['peak_anon_mb']} MB)",
                )
            )
    if "rescore" in figures:
        item = figures["rescore"]
        rows.append(
            (
                "rescore, cheap reward",
                f"{item['rollouts_per_s']:,} rollouts/s ({item['seconds']} s, workers {item['workers']})",
            )
        )
    if "judge_rescore" in figures:
        item = figures["judge_rescore"]
        rows.append(
            (
                "rescore, judge reward",
                f"{item['rollouts_per_s']:,} rollouts/s of {item['rollouts']:,}"
                f" (bound {item['bound_rollouts_per_s']:,}:"
                f" {item['concurrency_groups']} groups x {GROUP} / {item['latency_ms']} ms);"
                f" {item['judge_calls']:,} judge calls",
            )
        )
    if "backpressure" in figures:
        item = figures["backpressure"]
        rows.append(
            (
                "writer stalled (DB locked) mid-run",
                f"{item['stall_seconds']} s: {item['model_requests_during_stall']:,} model requests during it,"
                f" RSS {item['rss_mb_before_stall']} -> {item['peak_rss_mb_during_stall']} MB,"
                f" run completed with {item['completed']:,}",
            )
        )
    lines.append("| figure | value |\n|---|---|")
    lines += [f"| {name} | {value} |" for name, value in rows]
    if "inspector" in figures:
        lines.append("\n| inspector API call | cold s | warm s |\n|---|---:|---:|")
        lines += [f"| {name} | {v['cold_s']:.3f} | {v['warm_s']:.3f} |" for name, v in figures["inspector"].items()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=200_000, help="rollouts in the big run (a multiple of 4)")
    parser.add_argument("--root", type=Path, default=Path("/tmp/bmx-scale"), help="where runs and logs go")
    parser.add_argument("--concurrency", type=int, default=256, help="rollouts in flight during eval")
    parser.add_argument(
        "--mix", type=int, default=0, help="build the big run as a mixture of this many scenario envs (0: one env)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per inspector call; resume repeats")
    parser.add_argument("--workers", type=int, default=None, help="rescore worker processes (default: rescore's)")
    parser.add_argument("--judge-rollouts", type=int, default=8_000)
    parser.add_argument("--judge-latency-ms", type=float, default=50.0)
    parser.add_argument("--judge-concurrency", type=int, default=32, help="groups scored at once by the judge")
    parser.add_argument("--stall-rollouts", type=int, default=40_000)
    parser.add_argument("--stall-seconds", type=float, default=10.0)
    parser.add_argument(
        "--shared-inspector",
        dest="cold_per_call",
        action="store_false",
        help="one inspector server for every call (default: a fresh one per call, so each is cold)",
    )
    parser.add_argument(
        "--skip", default="", help="comma-separated steps to skip: rescore,judge,inspector,export,stall"
    )
    parser.add_argument("--export-formats", default="jsonl,parquet", help="the export step's formats, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--src", type=Path, default=SRC, help="the benchmax source tree to measure (default: this one)")
    parser.add_argument("--smoke", action="store_true", help="tiny: CI's check that every step runs")
    parser.add_argument("--reuse", action="store_true", help="measure the run a previous call built (no build step)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rollouts, args.concurrency, args.repeats = 2_000, 64, 1
        args.judge_rollouts, args.judge_latency_ms, args.stall_rollouts, args.stall_seconds = 200, 5.0, 2_000, 1.0
        args.cold_per_call = False
    args.rollouts -= args.rollouts % GROUP
    args.skip = {step for step in args.skip.split(",") if step}
    return args


def main(argv: list[str] | None = None) -> int:
    global SRC
    args = parse_args(argv)
    SRC = args.src.resolve()
    args.root.mkdir(parents=True, exist_ok=True)
    runs = args.root / "runs"
    run_dir = runs / (f"scale-mix{args.mix}-{args.rollouts}" if args.mix else f"scale-{args.rollouts}")
    figures: dict[str, Any] = {"rollouts": args.rollouts}
    if args.reuse and (run_dir / "run.sqlite").exists():
        args.skip.add("build")
        figures["rollouts"] = _stored(run_dir / "run.sqlite")
        rescored = runs / f"{run_dir.name}-rescored"
        if "rescore" in args.skip and (rescored / "run.sqlite").exists():
            figures["rescored_dir"] = str(rescored)  # compare with the rescored run a previous call made
    else:
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir(parents=True)
    with fake_server() as base_url:
        steps = [
            ("build", lambda: build(args, run_dir, base_url, figures)),
            ("resume", lambda: resume_nothing(args, run_dir, base_url, figures)),
            ("size", lambda: store_size(run_dir, figures)),
            ("export", lambda: exports(args, run_dir, figures)),
            ("rescore", lambda: rescore(args, runs, run_dir, figures)),
            ("inspector", lambda: inspector(args, runs, run_dir, figures)),
            ("judge", lambda: judge_rescore(args, base_url, figures)),
            ("stall", lambda: backpressure(args, base_url, figures)),
        ]
        for name, step in steps:
            if name in args.skip:
                continue
            clock = time.perf_counter()
            try:
                step()
            except Exception as exc:  # report what was measured, and what failed
                figures.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
                print(f"{name}: FAILED: {exc}", file=sys.stderr, flush=True)
                if name == "build":
                    break
            else:
                print(f"{name}: done in {time.perf_counter() - clock:.1f}s", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(figures, indent=1))
    figures.pop("rescored_dir", None)
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    for name, error in figures.get("errors", {}).items():
        print(f"step {name} failed: {error}")
    return 1 if figures.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
