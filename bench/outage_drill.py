"""The outage scenario of issue 18: the model server is killed mid-run and restarted on its port.

``benchmax eval`` of ``--rollouts`` tool rollouts (``scenario.AddEnv``: two model
requests and one tool call each) in groups of ``--group-size``, ``--in-flight``
at once, against ``fake_server.py`` answering each request after
``--latency-ms``. ``--kill-at`` seconds after the eval starts the server gets
SIGKILL; ``--down-for`` seconds later it starts again on the same port. Prints
one JSON line: the eval's exit code, wall time, termination reasons from the
run store, and the outages the run recorded.

``--src`` runs another checkout's ``src`` (say the code before the health gate:
``git archive e020694 src | tar -x -C /tmp/before``, then ``--src /tmp/before/src``).

    python bench/outage_drill.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _server(port: int, latency_ms: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", str(port), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError(f"fake server did not start: {line!r}")
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1200)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--kill-at", type=float, default=5.0)
    parser.add_argument("--down-for", type=float, default=20.0)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the benchmax source tree to run")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(args.src.resolve()), str(BENCH)])}
    server = _server(port, args.latency_ms)
    with tempfile.TemporaryDirectory(prefix="benchmax-outage-") as tmp:
        run_dir = Path(tmp) / "run"
        command = [
            sys.executable, "-m", "benchmax.cli", "eval", "scenario:AddEnv",
            "--env-arg", f"examples={args.rollouts // args.group_size}", "--base-url", base_url, "--model", "fake",
            "--group-size", str(args.group_size), "--concurrency", str(args.in_flight),
            "--run-dir", str(run_dir), "--no-progress",
        ]  # fmt: skip
        started = time.monotonic()
        log = Path(tmp) / "eval.log"
        with log.open("w") as out:
            evaluation = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                time.sleep(max(0.0, args.kill_at - (time.monotonic() - started)))
                os.kill(server.pid, signal.SIGKILL)
                server.wait()
                killed_at = time.monotonic() - started
                time.sleep(args.down_for)
                server = _server(port, args.latency_ms)
                restarted_at = time.monotonic() - started
                code = evaluation.wait(600)
            finally:
                if evaluation.poll() is None:
                    evaluation.kill()
                server.terminate()
                server.wait(10)
        wall = time.monotonic() - started
        connection = sqlite3.connect(run_dir / "run.sqlite")
        try:
            reasons = dict(connection.execute("SELECT termination_reason, COUNT(*) FROM rollouts GROUP BY 1"))
            distinct = connection.execute("SELECT COUNT(DISTINCT rollout_id) FROM rollouts").fetchone()[0]
            meta = dict(connection.execute("SELECT key, value FROM meta WHERE key IN ('outages', 'status')"))
        finally:
            connection.close()
        tail = log.read_text().splitlines()[-3:]
    print(
        json.dumps(
            {
                "label": args.label or str(args.src),
                "exit_code": code,
                "wall_s": round(wall, 1),
                "killed_at_s": round(killed_at, 1),
                "restarted_at_s": round(restarted_at, 1),
                "rollouts_stored": sum(reasons.values()),
                "distinct_ids": distinct,
                "reasons": reasons,
                "model_error": reasons.get("model_error", 0),
                "status": json.loads(meta.get("status", "null")),
                "outages": json.loads(meta.get("outages", "[]")),
                "eval_tail": tail,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
