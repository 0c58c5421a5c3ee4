"""Without the ``otel`` extra, benchmax runs as before, and tracing asked for says what to install.

OpenTelemetry is hidden from a real ``benchmax eval`` subprocess (its modules set to ``None`` in
``sys.modules``, so importing any of them fails as when the package is not installed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runkit import write_split

from benchmax.testing import ScriptedServer

ENV = '''
from benchmax.envs import BaseEnv, JsonlDataset


class EchoEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {"correct": float(rollout.messages[-1]["content"] == "ok")}
'''

WITHOUT_OTEL = (
    "import runpy, sys; "
    "sys.modules.update(dict.fromkeys(['opentelemetry', 'opentelemetry.trace', 'opentelemetry.sdk'], None)); "
    "sys.argv = ['benchmax', *sys.argv[1:]]; "
    "runpy.run_module('benchmax.cli', run_name='__main__')"
)


def _eval_without_otel(tmp_path: Path, server: ScriptedServer, *extra: str, **environ: str):
    (tmp_path / "env.py").write_text(ENV)
    script = json.dumps([{"content": "ok"}])
    write_split(tmp_path / "data", [{"prompt_messages": [{"role": "user", "content": f"hi\n#script: {script}"}]}])
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}, **environ)
    command = [
        sys.executable, "-c", WITHOUT_OTEL, "eval", f"{tmp_path / 'env.py'}:EchoEnv",
        "--data-dir", str(tmp_path / "data"), "--base-url", server.base_url, "--model", "scripted",
        "--run-dir", str(tmp_path / "run"), "--no-progress",
        *extra,
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running


def test_a_run_without_opentelemetry_installed_is_not_traced_and_succeeds(tmp_path, server):
    result = _eval_without_otel(tmp_path, server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "run").is_dir()


def test_asking_for_traces_without_opentelemetry_says_what_to_install(tmp_path, server):
    result = _eval_without_otel(tmp_path, server, "--otel-endpoint", "http://127.0.0.1:9/")
    assert result.returncode == 2  # a usage error, before anything ran
    assert "pip install 'benchmax[otel]'" in result.stdout + result.stderr
    assert not (tmp_path / "run").exists()


def test_an_otel_variable_set_for_other_programs_warns_and_the_run_goes_on_untraced(tmp_path, server):
    result = _eval_without_otel(tmp_path, server, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pip install 'benchmax[otel]'" in result.stdout + result.stderr
