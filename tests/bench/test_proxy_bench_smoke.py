"""``bench/proxy_overhead.py`` keeps working: a tiny run settles every rollout. Figures are printed, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_proxy_overhead_bench_runs_every_rollout_to_a_correct_answer():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "proxy_overhead.py", "--in-flight", "4", "--rollouts", "16"],
        cwd=ROOT / "bench",
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout[done.stdout.index("{") :])
    for part in ("proxy_alone", "through_proxy", "engine_loop"):
        assert figures[part]["failures"] == 0, figures
    assert figures["proxy_alone"]["calls_in_window"] > 0
