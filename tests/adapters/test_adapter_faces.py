"""Adapter specs on every face: rescore, mixtures, validate, train, and the install line for a missing framework."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="pip install 'benchmax[inspect-ai]'")
pytest.importorskip("reasoning_gym", reason="pip install 'benchmax[gallery]'")

from runkit import cli_env, run_cli

from benchmax import open_run
from benchmax.testing import ScriptedServer

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate, system_message


@task
def sums():
    return Task(
        dataset=[Sample(input=f"What is {a}+{a}?", target=TARGETS[a], id=f"s{a}") for a in range(4)],
        solver=[system_message("Answer with a number."), generate()],
        scorer=[match(), includes()],
    )


TARGETS = {0: "0", 1: "2", 2: "4", 3: "6"}
"""


def doubling_policy(body: dict) -> dict:
    """The right sum for 0 and 1, one off for 2 and 3."""
    text = body["messages"][-1]["content"]
    if text.startswith("What is "):
        a = int(text.removeprefix("What is ").split("+")[0])
        return {"content": f"ANSWER: {a + a + (a >= 2)}"}
    return {"content": "<answer>0</answer>"}


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "sums.py"
    path.write_text(TASK)
    return path


def rewards_by_example(run_dir: Path) -> dict[str, dict[str, float]]:
    with open_run(run_dir) as run:
        return {record.example_id: dict(record.rewards) for record in run.rollouts()}


def test_rescore_runs_the_tasks_scorers_as_they_are_now(tmp_path, task_file):
    spec = f"inspect:{task_file}@sums"
    with ScriptedServer(doubling_policy) as server:
        first = run_cli(
            "eval", spec, "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
            env=cli_env(),
        )  # fmt: skip
    assert first.returncode == 0, first.stdout
    stored = rewards_by_example(tmp_path / "run")
    assert stored == {
        "s0": {"match": 1.0, "includes": 1.0},
        "s1": {"match": 1.0, "includes": 1.0},
        "s2": {"match": 0.0, "includes": 0.0},
        "s3": {"match": 0.0, "includes": 0.0},
    }

    same = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "same", env=cli_env())
    assert same.returncode == 0, same.stdout
    assert rewards_by_example(tmp_path / "same") == stored

    # The targets change (2+2 is now "5", as the model said): rescoring needs no model call.
    task_file.write_text(TASK.replace('2: "4"', '2: "5"'))
    changed = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "changed", env=cli_env())
    assert changed.returncode == 0, changed.stdout
    assert rewards_by_example(tmp_path / "changed") == {**stored, "s2": {"match": 1.0, "includes": 1.0}}


def test_a_mixture_of_an_inspect_task_and_reasoning_gym_runs_each_with_its_own_scores(tmp_path, task_file):
    with ScriptedServer(doubling_policy) as server:
        result = run_cli(
            "eval", f"inspect:{task_file}@sums", "reasoning-gym:chain_sum", "--env-arg", "chain_sum:size=3",
            "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run", env=cli_env(),
        )  # fmt: skip
    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        records = list(run.rollouts())
    by_env = {env: sorted(r.example_id for r in records if r.env == env) for env in {r.env for r in records}}
    assert by_env["sums"] == ["sums/s0", "sums/s1", "sums/s2", "sums/s3"]
    assert len(by_env["chain_sum"]) == 3
    assert all(set(r.rewards) == {"match", "includes"} for r in records if r.env == "sums")
    assert all(set(r.rewards) == {"correct", "format"} for r in records if r.env == "chain_sum")


@pytest.mark.parametrize("spec", ["inspect:{file}@sums", "reasoning-gym:chain_sum,word_sorting"])
def test_validate_passes_an_adapter_spec(task_file, spec):
    result = run_cli("validate", spec.format(file=task_file), env=cli_env())
    assert result.returncode == 0, result.stdout


BLOCK = """
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""


@pytest.mark.parametrize(
    ("spec", "module", "line"),
    [
        ("inspect:{file}@sums", "inspect_ai", "pip install 'benchmax[inspect-ai]'"),
        ("reasoning-gym:chain_sum", "reasoning_gym", "pip install 'benchmax[gallery]'"),
        ("verifiers:vf_sums", "verifiers", "pip install 'benchmax[adapters]'"),
    ],
)
def test_a_missing_framework_stops_the_run_with_exit_2_and_its_install_line(tmp_path, task_file, spec, module, line):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK.format(module=module))
    env = cli_env(PYTHONPATH=os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]))
    result = run_cli(
        "eval", spec.format(file=task_file), "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
        "--run-dir", tmp_path / "run", env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert f"install it with: {line}" in result.stdout
    assert "Traceback" not in result.stdout


def test_train_takes_a_mixture_of_adapter_specs(tmp_path, task_file):
    pytest.importorskip("trl", reason="pip install 'benchmax[train]'")
    from benchmax.train.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    completed = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "train", "--env", f"inspect:{task_file}@sums",
            "--env", "reasoning-gym:chain_sum",
            "--env-arg", "chain_sum:size=4", "--model", str(model), "--run-dir", str(tmp_path / "train"),
            "--max-steps", "1", "--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "4", "--threads", "1",
        ],
        capture_output=True, text=True, timeout=280, env=cli_env(),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    with open_run(tmp_path / "train") as run:
        envs = {record.env for record in run.rollouts()}
    assert envs <= {"sums", "chain_sum"} and envs, envs
