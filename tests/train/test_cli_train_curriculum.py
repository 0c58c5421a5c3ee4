"""``benchmax train --curriculum`` in a real subprocess: the state kept, the resume, the refusals."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from benchmax.store import DB_NAME, Run

SIGNAL_ENV = f"{Path(__file__).with_name('signal_env.py')}:SignalEnv"
REASONING_GYM = str(Path(__file__).parents[2] / "examples" / "reasoning_gym")
SMALL = ["--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "4", "--threads", "1"]


def _train(*args: str, timeout: int = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "train", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"},
        timeout=timeout,
    )


def _ok(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    return completed.stdout + completed.stderr


@pytest.mark.timeout(900)  # two trainings in subprocesses: minutes on a loaded 2-core machine
def test_a_filtered_run_keeps_its_curriculum_and_a_resume_continues_it(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    common = ["--model", str(tiny_model_dir), "--run-dir", str(run_dir), *SMALL]
    spec = "filter(recheck=100)"
    args = [
        SIGNAL_ENV, "--env-arg", "size=6", "--env-arg", "flat=[0,1,2,3]", *common, "--max-steps", "2",
        "--save-steps", "1", "--async-steps", "0", "--curriculum", spec,
    ]  # fmt: skip
    first = _ok(_train(*args))
    header = next(line for line in first.splitlines() if line.strip().startswith("step "))
    assert "aside" in header.split(), header
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        kept = [row[0] for row in conn.execute("SELECT step FROM sampler_states ORDER BY step")]
        state = orjson.loads(conn.execute("SELECT state FROM sampler_states WHERE step = 1").fetchone()[0])
    assert kept == [0, 1]
    assert state["sampler"] == "filter(recheck=100,pass=1)"
    assert len(state["state"]["aside"]) >= 1  # four of six examples are always dead

    resumed = _ok(_train("--resume", str(run_dir), "--max-steps", "3"))
    assert "curriculum filter(recheck=100,pass=1): resumed with its state after step 2" in resumed
    with Run(run_dir) as run:
        assert run.run_meta.train["curriculum"] == spec
        assert run.run_meta.provenance.extra["curriculum"] == spec
        steps = run.steps()
    assert [metrics["trainer_step"] for _, _, metrics in steps] == [1, 2, 3]
    aside = [metrics["curriculum/set_aside"] for _, _, metrics in steps]
    assert aside[2] >= aside[1] >= 1  # nothing set aside is forgotten across the resume (recheck is 100 steps)



def test_a_resume_keeps_its_own_curriculum_and_refuses_another(tmp_path):
    from benchmax.runner import RunSession
    from benchmax.train import TrainConfig

    config = TrainConfig(env=SIGNAL_ENV, run_dir=tmp_path / "run", curriculum="filter")
    RunSession.create(tmp_path / "run", kind="train", meta={"train": config.to_meta()}).close()
    refused = _train("--resume", str(tmp_path / "run"), "--curriculum", "levels")
    assert refused.returncode == 2
    assert "continues its own curriculum (filter); give no --curriculum" in " ".join(refused.stderr.split())


@pytest.mark.parametrize(
    ("env", "spec", "message"),
    [
        (SIGNAL_ENV, "easy-first", "unknown part 'easy-first'"),
        (SIGNAL_ENV, "levels", "no env of this run exposes difficulty levels"),
        (REASONING_GYM, "levels(start=9)", "has no difficulty level '9'; its levels are: 0, 1, 2, 3, 4"),
        (REASONING_GYM, "filter+weights", "follows the envs of a mixture"),
    ],
)
def test_a_curriculum_that_cannot_run_is_exit_2_before_the_model_loads(tiny_model_dir, tmp_path, env, spec, message):
    completed = _train(env, "--model", str(tiny_model_dir), "--run-dir", str(tmp_path / "run"), "--curriculum", spec)
    assert completed.returncode == 2, completed.stdout[-2000:] + completed.stderr[-4000:]
    assert message in " ".join(completed.stderr.split())
    assert not (tmp_path / "run" / DB_NAME).exists()


@pytest.mark.timeout(600)
def test_an_endless_procedural_env_trains_through_its_levels_and_stores_what_it_drew(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    args = [
        REASONING_GYM, "--env-arg", "endless=true", "--model", str(tiny_model_dir), "--run-dir", str(run_dir),
        *SMALL, "--max-steps", "2", "--async-steps", "0", "--curriculum", "levels(promote=0.5,window=1)",
    ]  # fmt: skip
    _ok(_train(*args))
    with Run(run_dir) as run:
        steps = run.steps()
    levels = [metrics["curriculum/level"] for _, _, metrics in steps]
    assert levels == [0.0, 0.0]  # a noise policy never passes a level
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        stored = {row[0] for row in conn.execute("SELECT example_id FROM examples")}
        trained = {row[0] for row in conn.execute("SELECT DISTINCT example_id FROM rollouts WHERE step IS NOT NULL")}
        payloads = [orjson.loads(row[0]) for row in conn.execute("SELECT payload FROM examples")]
    assert trained <= stored  # every example drawn from a level is stored with the run
    assert len(trained) >= 4
    questions = {payload["entry"]["question"] for payload in payloads}
    assert len(questions) == len(payloads)


def test_evaluating_an_endless_dataset_needs_max_examples(tmp_path):
    command = [
        sys.executable, "-m", "benchmax.cli", "eval", REASONING_GYM, "--env-arg", "endless=true",
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--run-dir", str(tmp_path / "run"),
    ]  # fmt: skip
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        timeout=120,
    )
    assert completed.returncode == 2
    said = " ".join((completed.stdout + completed.stderr).split())
    assert "is endless (it generates examples without end): give how many to take, with --max-examples N" in said


@pytest.mark.timeout(600)
def test_a_mixtures_curriculum_logs_each_envs_weight_and_set_aside_count(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    args = [
        "--env", f"signal={SIGNAL_ENV}=0.5", "--env", "format=examples/format=0.5", "--model", str(tiny_model_dir),
        "--run-dir", str(run_dir), *SMALL, "--max-steps", "2", "--async-steps", "0",
        "--curriculum", "filter+weights(min=0.2,max=0.8)",
    ]  # fmt: skip
    _ok(_train(*args))
    with Run(run_dir) as run:
        steps = run.steps()
        assert run.run_meta.provenance.extra["curriculum"] == "filter+weights(min=0.2,max=0.8)"
    for _, _, metrics in steps:
        weights = [metrics[f"curriculum/{env}/weight"] for env in ("format", "signal")]
        assert sum(weights) == pytest.approx(1.0)
        assert all(0.2 - 1e-9 <= weight <= 0.8 + 1e-9 for weight in weights)
        aside = [metrics.get(f"curriculum/{env}/set_aside", 0.0) for env in ("format", "signal")]
        assert sum(aside) == metrics["curriculum/set_aside"]


@pytest.mark.timeout(900)
def test_a_sampler_that_raises_stops_the_run_with_exit_2_and_the_fixed_sampler_resumes_it(tiny_model_dir, tmp_path):
    sampler = tmp_path / "mine.py"
    sampler.write_text(
        "from benchmax.train import Sampler\n"
        "class Mine(Sampler):\n"
        "    def draw(self, pool, step):\n"
        "        if step >= 1:\n"
        "            raise LookupError('no examples left at this level')\n"
        "        return pool.ids[0]\n"
    )
    run_dir = tmp_path / "run"
    args = [
        SIGNAL_ENV, "--model", str(tiny_model_dir), "--run-dir", str(run_dir), *SMALL, "--max-steps", "3",
        "--save-steps", "1", "--async-steps", "0", "--curriculum", f"{sampler}:Mine",
    ]  # fmt: skip
    failed = _train(*args)
    said = " ".join(failed.stderr.split())
    assert failed.returncode == 2, failed.stdout[-2000:] + failed.stderr[-4000:]
    assert f"the curriculum's sampler ({sampler}:Mine) raised in draw(): LookupError: no examples left" in said
    assert f"benchmax train --resume {run_dir}" in said
    with Run(run_dir) as run:
        assert run.run_meta.status == "failed"
        assert [metrics["trainer_step"] for _, _, metrics in run.steps()] == [1]

    sampler.write_text(sampler.read_text().replace("step >= 1", "step >= 99"))
    _ok(_train("--resume", str(run_dir), "--max-steps", "3"))
    with Run(run_dir) as run:
        assert [metrics["trainer_step"] for _, _, metrics in run.steps()] == [1, 2, 3]
