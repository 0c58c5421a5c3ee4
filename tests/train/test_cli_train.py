"""``benchmax train`` in a real subprocess: what a person reads per step, and what is kept."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson

ENV_FILE = str(Path(__file__).with_name("calculator_env.py"))
STEPS = 2


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_benchmax_train_prints_one_compact_row_per_step_and_keeps_every_figure_in_metrics_jsonl(
    tiny_model_dir, tmp_path
):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "train", f"{ENV_FILE}:CalculatorEnv",
            "--model", str(tiny_model_dir), "--run-dir", str(run_dir), "--max-steps", str(STEPS),
            "--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "6", "--threads", "1",
            "--weight", "short=1", "--weight", "used_tool=0.5",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"},
        timeout=280,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    out = completed.stdout
    # no metric dict of TRL's, on either stream
    assert "{'" not in out + completed.stderr, out
    # nor transformers' deprecation notices about names benchmax or TRL use (issue 32)
    assert "FutureWarning" not in completed.stderr, completed.stderr[-3000:]

    lines = out.splitlines()
    headers = [index for index, line in enumerate(lines) if _cells(line)[0] == "step"]
    assert len(headers) == 1, out  # the header once: the columns do not change between steps
    header = _cells(lines[headers[0]])
    assert header[:4] == ["step", "reward", "short", "used_tool"], header
    assert {"dead", "seconds"} <= set(header) and any(name.startswith("KL") for name in header), header
    rows = [_cells(line) for line in lines[headers[0] + 1 :] if re.match(r"\s*\d+/\d+\s", line)]
    assert [row[0] for row in rows] == [f"{step}/{STEPS}" for step in range(1, STEPS + 1)], out
    for row in rows:
        assert len(row) == len(header), (header, row)
        cell = dict(zip(header, row, strict=True))
        assert math.isfinite(float(cell["reward"])), cell
        # a component no rollout of the step emitted keeps its column, as "-"
        components = [cell[name] for name in ("short", "used_tool")]
        assert all(value == "-" or math.isfinite(float(value)) for value in components), cell
        assert any(value != "-" for value in components), cell
        assert re.fullmatch(r"\d+/\d+", cell["dead"]), cell
        assert float(cell["seconds"]) > 0, cell

    # the full figures of every step stay in metrics.jsonl
    logged = [orjson.loads(line) for line in (run_dir / "metrics.jsonl").read_bytes().splitlines() if line.strip()]
    steps = [entry for entry in logged if "reward" in entry]
    assert [entry["step"] for entry in steps] == list(range(1, STEPS + 1))
    for entry in steps:
        assert {"loss", "grad_norm", "learning_rate", "rewards/short/mean", "rewards/used_tool/mean"} <= set(entry)
        assert {"groups/dead_share", "is_ratio/mean", "policy/staleness_max"} <= set(entry)
        assert len(entry) > 2 * len(header), sorted(entry)
