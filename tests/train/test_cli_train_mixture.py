"""``benchmax train --env A=W --env B=W``: a mixture trained in a real subprocess, resumed, and from Python.

The members are two small envs written into the test's directory (``tests/mix/mixenvs.py``),
each scoring its own component; the policy is the tiny model, so rewards are whatever it
writes: the tests read which env each figure belongs to, not how good it is.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run
from benchmax.mix import EnvMix, MemberSpec, MixMember, MixSpec
from benchmax.train import TrainConfig, TrainError, train


def _members(tmp_path: Path) -> tuple[Path, Path]:
    a = write_env(tmp_path / "envs", "a", component="exact", rows=2, train_rows=3)
    b = write_env(tmp_path / "envs", "b", component="format", rows=2, train_rows=3)
    return a, b


def _train(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "train", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"},
        timeout=400,
    )


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_bytes().splitlines()
    return [entry for entry in map(orjson.loads, filter(None, lines)) if "reward" in entry]


def _stored_mix(run_dir: Path) -> list[tuple[str, str, float]]:
    with open_run(run_dir) as run:
        train_meta = run.run_meta.train
    assert train_meta is not None
    mix = TrainConfig.from_meta(train_meta).mix
    assert mix is not None
    return [(member.name, member.spec, member.weight) for member in mix.members]


def test_a_mixture_trains_from_the_command_line_and_resumes_with_the_same_envs(tiny_model_dir, tmp_path):
    a, b = _members(tmp_path)
    run_dir = tmp_path / "run"
    first = _train(
        "--env", f"{a}=0.7", "--env", f"{b}=0.3", "--model", tiny_model_dir, "--run-dir", run_dir,
        "--max-steps", "1", "--save-steps", "1", "--group-size", "2", "--prompts-per-step", "4",
        "--max-tokens", "4", "--threads", "1", "--dead-groups", "keep", "--eval-group-size", "2",
    )  # fmt: skip
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    out = first.stdout
    # the step row has a column per env; the eval a table per env, before and after
    assert "a reward/dead" in out and "b reward/dead" in out, out
    assert "env a (4 rollouts), step 0 -> step 1:" in out, out
    assert "env b (4 rollouts), step 0 -> step 1:" in out, out
    # each env's step figures in metrics.jsonl, each with its own component only
    (step,) = _steps(run_dir)
    assert step["env/a/rollouts"] + step["env/b/rollouts"] == 8, step
    assert "env/a/rewards/exact" in step and "env/a/rewards/format" not in step, step
    assert "env/b/rewards/format" in step and "env/b/rewards/exact" not in step, step
    # the stored run: one suite row per env, each with its own component; the mixture as given
    with open_run(run_dir) as run:
        suite = {figures.env: figures for figures in run.suite()}
    assert set(suite) == {"a", "b"}
    assert set(suite["a"].components) == {"exact"} and set(suite["b"].components) == {"format"}
    assert sum(figures.rollouts for figures in suite.values()) == 8
    mixture = [("a", str(a), 0.7), ("b", str(b), 0.3)]
    assert _stored_mix(run_dir) == mixture

    resumed = _train("--resume", run_dir, "--max-steps", "2")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-6000:]
    assert "trained 2 steps" in resumed.stdout, resumed.stdout
    assert "a reward/dead" in resumed.stdout and "b reward/dead" in resumed.stdout, resumed.stdout
    assert [entry["step"] for entry in _steps(run_dir)] == [1, 2]
    assert _stored_mix(run_dir) == mixture
    with open_run(run_dir) as run:
        steps = run.steps()
        envs = {rollout.env for rollout in run.rollouts() if rollout.batch == 1}
        suite = {figures.env: figures for figures in run.suite()}
    assert [number for number, _, _ in steps] == [0, 1]
    assert set(steps[1][2]["envs"]) <= {"a", "b"} and steps[1][2]["envs"], steps[1][2]
    assert envs and envs <= {"a", "b"}  # the second step's rollouts are the mixture's
    assert sum(figures.rollouts for figures in suite.values()) == 16
    assert set(suite["a"].components) == {"exact"} and set(suite["b"].components) == {"format"}


def test_an_envmix_instance_trains_from_python_and_is_stored_for_resume(tiny_model_dir, tmp_path):
    a, b = _members(tmp_path)
    spec = MixSpec((MemberSpec("a", str(a), 2.0), MemberSpec("b", str(b), 1.0, max_examples=2)), seed=3)
    mix = asyncio.run(EnvMix.load(spec))
    try:
        result = train(
            mix,
            model=str(tiny_model_dir),
            run_dir=tmp_path / "run",
            group_size=2,
            prompts_per_step=4,
            max_tokens=4,
            max_steps=1,
            dead_groups="keep",
            eval_group_size=2,
            threads=1,
        )
    finally:
        asyncio.run(mix.aclose())
    assert result.steps == 1
    assert result.eval_before is not None and result.eval_after is not None
    assert [figures.env for figures in result.eval_after.envs] == ["a", "b"]
    (logged,) = [entry for entry in result.log_history if "reward" in entry]
    assert logged["env/a/rollouts"] + logged["env/b/rollouts"] == 8
    with open_run(result.run_dir) as run:
        train_meta = run.run_meta.train
    assert train_meta is not None
    assert TrainConfig.from_meta(train_meta).mix == spec  # what --resume loads
    # the held-out eval runs record the mixture too
    with open_run(result.eval_after.run_dir) as run:
        assert run.run_meta.config["mix"] == spec.to_json()

    # members given as instances, not specs: trained, but nothing to load them from on resume
    loaded = asyncio.run(EnvMix.load(spec))
    try:
        unnamed = EnvMix([MixMember(member.name, member.env, member.weight) for member in loaded.members])
        result = train(
            unnamed, model=str(tiny_model_dir), run_dir=tmp_path / "run2", group_size=2, prompts_per_step=2,
            max_tokens=4, max_steps=1, dead_groups="keep", threads=1,
        )  # fmt: skip
    finally:
        asyncio.run(loaded.aclose())
    with open_run(result.run_dir) as run:
        assert "mix" not in (run.run_meta.train or {})


def test_the_train_config_keeps_a_mixture_typed_and_a_run_of_one_env_as_before(tmp_path):
    spec = MixSpec((MemberSpec("a", "envs/a", 0.7, {"k": 1}, 3), MemberSpec("b", "envs/b", 0.3)), seed=4)
    config = TrainConfig(env="a+b", mix=spec, run_dir=tmp_path)
    stored = orjson.loads(orjson.dumps(config.to_meta()))
    assert stored["mix"] == spec.to_json()
    assert TrainConfig.from_meta(stored) == config
    assert "mix" not in TrainConfig(env="examples/math").to_meta()  # what a run of one env always stored
    assert TrainConfig.from_meta(TrainConfig(env="examples/math").to_meta()).mix is None
    for per_env in ({"env_kwargs": {"k": 1}}, {"data_dir": tmp_path}):
        with pytest.raises(TrainError, match="per env: give them in its members"):
            TrainConfig(env="a+b", mix=spec, **per_env)
