"""Every gallery env trains: two GRPO steps of ``benchmax train`` on the tiny random model.

Each ``examples/NAME/env.py`` goes through the real training path (dataset,
probe group, rollouts by the engine with the in-process policy, TRL's update,
the run store, ``metrics.jsonl``). The policy is noise, so the rewards say
nothing about the env's task; what is checked is that nothing in the env breaks
under the trainer: every rollout settles with a scorable termination reason, is
stored with its step (dropped dead groups included), every reward component the
env emits reaches the trainer's metrics with the stored values' mean, each step's
metrics are in the run store, and a tool env's own tools run.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmax.envs import is_scorable
from benchmax.store import Run
from benchmax.train import train
from benchmax.train.tiny import build_tiny_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GALLERY = sorted(path.name for path in EXAMPLES.iterdir() if (path / "env.py").is_file())
ENV_KWARGS: dict[str, dict[str, Any]] = {"reasoning_gym": {"task": "basic_arithmetic", "size": 8}}
"""Constructor kwargs for envs that need them; every other env is built with none."""
CALLS: dict[str, list[dict[str, Any]]] = {
    "code": [{"name": "run_python", "arguments": {"code": "print(6*7)"}}],
    "math": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
    "mcp_notes": [{"name": "list_notes", "arguments": {}}],
    "search": [{"name": "search", "arguments": {"query": "harbour"}}],
    "sql": [{"name": "list_tables", "arguments": {}}],
    "swe": [{"name": "shell", "arguments": {"command": "ls"}}],
    "workspace": [{"name": "list_files", "arguments": {}}],
}
"""One valid call per tool env, a single token of the tiny model, so its tools really run."""

STEPS = 2
GROUP = 2
PROMPTS = 2
SETTINGS: dict[str, Any] = {
    "max_steps": STEPS,
    "group_size": GROUP,
    "prompts_per_step": PROMPTS,
    "max_examples": 4,
    "max_tokens": 16,
    "threads": 1,
    "save_steps": 100,
    "seed": 0,
    "max_refill": PROMPTS,
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_the_gallery_is_discovered():
    shipped = {"math", "workspace", "ranking", "format", "reasoning_gym", "code", "sql", "search", "mcp_notes", "swe"}
    assert shipped <= set(GALLERY)


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_env_trains_two_grpo_steps_with_every_rollout_stored_and_every_component_logged(
    name: str, tmp_path: Path
):
    model = build_tiny_model(tmp_path / "model", calls=CALLS.get(name, ()))
    result = train(
        str(EXAMPLES / name),
        model=str(model),
        run_dir=tmp_path / "run",
        env_kwargs=ENV_KWARGS.get(name, {}),
        **SETTINGS,
    )
    assert result.steps == STEPS
    emitted = _check_run(result.run_dir)
    assert emitted <= set(result.components), f"{name}: components the probe missed: {emitted - set(result.components)}"
    if name in CALLS:
        with Run(result.run_dir) as run:
            answers = [m["content"] for r in run.rollouts() for m in r.messages if m["role"] == "tool"]
        assert any(not str(answer).startswith("error:") for answer in answers), f"{name}: no tool ran: {answers}"


def test_the_train_cli_trains_a_gallery_env_given_env_args_in_a_subprocess(tiny_model: Path, tmp_path: Path):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "train", str(EXAMPLES / "reasoning_gym"),
            "--model", str(tiny_model), "--run-dir", str(run_dir),
            "--env-arg", "task=basic_arithmetic", "--env-arg", "size=8",
            "--max-steps", str(STEPS), "--group-size", str(GROUP), "--prompts-per-step", str(PROMPTS),
            "--max-refill", str(PROMPTS),
            "--max-examples", "4", "--max-tokens", "16", "--threads", "1", "--save-steps", "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:]
    assert f"trained {STEPS} steps" in completed.stdout
    assert _check_run(run_dir) == {"correct", "format"}
    with Run(run_dir) as run:
        assert run.meta["train"]["env_kwargs"] == {"task": "basic_arithmetic", "size": 8}


def _check_run(run_dir: Path) -> set[str]:
    """Assert what a finished two-step training run must hold; return the emitted components."""
    with Run(run_dir) as run:
        assert run.meta["status"] == "completed"
        rollouts = list(run.rollouts())
        steps = {step: metrics for step, _, metrics in run.steps()}
    by_step: dict[int | None, list[Any]] = defaultdict(list)
    for rollout in rollouts:
        by_step[rollout.step].append(rollout)
    assert sorted(by_step) == sorted(steps) == list(range(STEPS))
    for step, rows in by_step.items():
        # dead groups are dropped and the step refilled, up to max_refill extra groups; all are stored
        assert len(rows) == steps[step]["groups/drawn"] * GROUP
        assert GROUP * PROMPTS <= len(rows) <= GROUP * PROMPTS * 2
    # a random policy may hit a budget (turns, tool calls, tokens): scorable, with the
    # budget named in ``error``; anything else means the env or the engine failed
    failed = [
        f"{rollout.rollout_id}: {rollout.termination_reason} {rollout.error}"
        for rollout in rollouts
        if not is_scorable(rollout.termination_reason)
        or (rollout.error is not None and rollout.termination_reason == "finished")
    ]
    assert not failed, "rollouts failed operationally:\n" + "\n".join(failed)
    assert all(rollout.completion_tokens > 0 for rollout in rollouts)
    emitted = {name for rollout in rollouts for name in rollout.raw_rewards}
    assert emitted, "the env emitted no reward component"

    logged = [entry for entry in _metrics(run_dir) if "reward" in entry]
    assert [entry["step"] for entry in logged] == list(range(1, STEPS + 1))
    for entry in logged:
        # TRL logs after the update (step s); the rollouts were sampled before it (step s - 1)
        stored = by_step[entry["step"] - 1]
        for name in emitted:
            assert f"rewards/{name}/mean" in entry, f"rewards/{name}/mean missing from metrics.jsonl"
            key = f"generated/{name}"  # the mean of every rollout the step generated and stored
            values = [rollout.rewards[name] for rollout in stored if name in rollout.rewards]
            if values:
                assert math.isclose(entry[key], sum(values) / len(values), abs_tol=1e-5), (key, entry[key], values)
    return emitted


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "metrics.jsonl").read_bytes().splitlines() if line.strip()]
