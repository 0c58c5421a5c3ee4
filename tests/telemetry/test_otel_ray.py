"""Rollouts run on Ray actors (``--executor ray``) are traced: each actor starts its own exporter from
the run's typed settings and flushes it as it closes. ``benchmax eval`` in a subprocess starts its own
local Ray cluster (two actors, which run every rollout); the receiver is the real one on loopback
(issue #34.5)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from receiver import OtlpReceiver
from runkit import cli_command, write_split
from test_otel_export import ENV, SCRIPT, _check_tree, _env


def test_rollouts_on_ray_actors_are_traced_and_keys_come_only_from_the_actors_environment(
    tmp_path: Path, server, receiver: OtlpReceiver
) -> None:
    key = "sk-ray-otel-header-secret"
    (tmp_path / "env.py").write_text(ENV)
    prompt = f"2 + 1?\n#script: {json.dumps(SCRIPT)}"
    write_split(tmp_path / "data", [{"prompt_messages": [{"role": "user", "content": prompt}], "answer": "3"}] * 2)
    run_dir = tmp_path / "ray-run"
    done = subprocess.run(
        cli_command(
            "eval", f"{tmp_path / 'env.py'}:AddEnv", "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--model", "scripted", "--run-dir", run_dir, "--no-progress", "--executor", "ray", "--workers", "2",
            "--otel-endpoint", receiver.url,
        ),
        env=_env(OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={key}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=420, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]
    _check_tree(receiver, server, run_dir)
    assert receiver.headers and all(headers.get("x-api-key") == key for headers in receiver.headers)
    assert not [path for path in run_dir.rglob("*") if path.is_file() and key.encode() in path.read_bytes()]
