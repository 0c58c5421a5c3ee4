"""Running a scenario: fresh scripted servers, the harness in a given interpreter, and what to compare."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from compat_scenarios import ModelPolicy, Scenario, judge_policy, summarize

from benchmax.testing import ScriptedServer

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "reference_harness.py"
SRC = HERE.parents[1] / "src"
RECORDED = HERE / "reference_0.2.5.json"
HARNESS_TIMEOUT = 240


def clean_environment() -> dict[str, str]:
    """This process's environment without the Python search-path settings, which belong to one interpreter."""
    return {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}


def run_harness(python: str, spec: dict[str, Any], workdir: Path, *, ours: bool) -> dict[str, Any]:
    """``reference_harness.py SPEC`` in ``python``: this project's src first when ``ours``."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = clean_environment()
    if ours:
        env["PYTHONPATH"] = str(SRC)
    done = subprocess.run(
        [python, str(HARNESS), str(spec_path)],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=HARNESS_TIMEOUT,
    )
    if done.returncode != 0:
        raise AssertionError(f"harness failed in {python} (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def transcripts(server: ScriptedServer) -> list[str]:
    """What the model was sent, order-free: each request's messages and tools as canonical JSON."""
    return sorted(
        json.dumps({"messages": body.get("messages"), "tools": body.get("tools")}, sort_keys=True)
        for body in server.requests
    )


def play(scenario: Scenario, python: str, workdir: Path, *, ours: bool) -> dict[str, Any]:
    """One run of ``scenario``: its summarized outcomes, what the model and judge saw, and auth headers."""
    with ScriptedServer(ModelPolicy()) as model, ScriptedServer(judge_policy) as judge:
        spec = scenario.spec(workdir / "data", model.base_url, judge.base_url)
        raw = run_harness(python, spec, workdir, ours=ours)
        return {
            "outcome": summarize(raw),
            "raw": raw,
            "model_requests": transcripts(model),
            "model_auth": sorted({h.get("Authorization", "") for h in model.headers}),
            "judge_requests": judge.counts["requests"],
            "judge_auth": sorted({h.get("Authorization", "") for h in judge.headers}),
        }
