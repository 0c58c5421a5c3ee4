"""``bench/adapters_inspect.py`` and ``adapters_verifiers.py`` keep working: both runners finish.

Figures are printed, never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_inspect_adapter_bench_runs_both_sides_to_the_end():
    pytest.importorskip("inspect_ai", reason="pip install 'benchmax[inspect-ai]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "adapters_inspect.py", "--smoke"],
        cwd=ROOT / "bench",
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.strip().startswith("inspect eval") for line in lines), done.stdout
    assert any(line.strip().startswith("benchmax eval inspect:") for line in lines), done.stdout
    assert "ratio benchmax / inspect:" in done.stdout


def test_the_verifiers_adapter_bench_runs_both_sides_to_the_end():
    pytest.importorskip("verifiers.v1", reason="pip install 'benchmax[adapters]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "adapters_verifiers.py", "--smoke"],
        cwd=ROOT / "bench",
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.strip().startswith("verifiers run_slot") for line in lines), done.stdout
    assert any(line.strip().startswith("benchmax eval verifiers:") for line in lines), done.stdout
    assert "ratio benchmax / verifiers:" in done.stdout
