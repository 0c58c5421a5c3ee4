"""``bench/scale.py`` keeps working: its smoke run goes through every step and reports every figure.

Not a timed test: the figures are printed by the script, never compared to targets here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_smoke_builds_resumes_inspects_exports_and_rescores_a_run(tmp_path: Path) -> None:
    figures_file = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--smoke", "--root", str(tmp_path / "scale"),
         "--json", str(figures_file)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    figures = json.loads(figures_file.read_text())
    assert "errors" not in figures
    assert figures["rollouts"] == 2_000
    assert figures["eval"]["peak_rss_mb"] > 0
    assert figures["resume_nothing_to_do_s"] > 0
    assert figures["store_bytes_per_rollout"] > 0
    assert figures["export_jsonl"]["rollouts_per_s"] > 0 and figures["export_parquet"]["rollouts_per_s"] > 0
    assert figures["rescore"]["rollouts_per_s"] > 0
    assert figures["judge_rescore"]["judge_calls"] == figures["judge_rescore"]["rollouts"]
    assert figures["backpressure"]["completed"] == figures["backpressure"]["rollouts"]
    assert len(figures["inspector"]) >= 20
    assert all(call["cold_s"] > 0 and call["warm_s"] > 0 for call in figures["inspector"].values())
    assert "| inspector API call | cold s | warm s |" in done.stdout
