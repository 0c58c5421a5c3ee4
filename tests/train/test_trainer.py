"""GRPO through TRL on a multi-turn tool env, with a tiny random policy."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch
from calculator_env import CalculatorEnv
from typer.testing import CliRunner

from benchmax.store import DB_NAME
from benchmax.train import build, run

ENV_FILE = str(Path(__file__).with_name("calculator_env.py"))


def _session(model_dir, run_dir, bias, **overrides):
    settings = {
        "model": str(model_dir),
        "run_dir": run_dir,
        "group_size": 4,
        "prompts_per_step": 2,
        "max_tokens": 8,
        "learning_rate": 1e-3,
        "weights": {"short": 1.0, "used_tool": 0.5},
        "save_steps": 1,
        "seed": 0,
    }
    settings.update(overrides)
    session = build(CalculatorEnv(broken=True), **settings)
    session.policy.generate_kwargs = {"sequence_bias": bias}
    return session


def test_grpo_steps_receive_the_envs_rewards_and_masks(tiny_model_dir, tool_bias, tmp_path):
    torch.manual_seed(0)
    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=3, drop_unscorable=True)
    trainer = session.trainer
    seen = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        output = original(inputs)
        seen.append((session.bridge.last, output))
        return output

    trainer._generate_and_score_completions = spy
    before = [parameter.detach().clone() for parameter in trainer.model.parameters()]
    try:
        result = run(session)
    finally:
        session.close()

    assert result.steps == 3
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    assert result.components == ("short", "used_tool")
    logged = [entry for entry in result.log_history if "reward" in entry]
    assert len(logged) == 3 == len(seen)
    failures = 0
    for (batch, output), entry in zip(seen, logged, strict=True):
        scorable = [i for i, o in enumerate(batch.outcomes) if o.termination_reason != "context_error"]
        failures += len(batch.outcomes) - len(scorable)
        for name in ("short", "used_tool"):
            values = [batch.rewards[i][name] for i in scorable]
            assert abs(entry[f"rewards/{name}/mean"] - sum(values) / len(values)) < 1e-5
        mask = output["tool_mask"]
        for row, sequence in enumerate(batch.sequences):
            width = len(sequence.env_mask)
            assert mask[row, :width].tolist() == list(sequence.env_mask)
            assert output["completion_ids"][row, :width].tolist() == list(sequence.completion_ids)
        for row, outcome in enumerate(batch.outcomes):
            if outcome.termination_reason == "context_error":
                assert output["advantages"][row].item() == 0.0
    assert failures > 0, "the broken example should be drawn at least once"
    assert any(0 in sequence.env_mask and 1 in sequence.env_mask for batch, _ in seen for sequence in batch.sequences)

    run_dir = result.run_dir
    assert (run_dir / "reward_curve.png").stat().st_size > 1000
    assert sorted(path.name for path in (run_dir / "checkpoints").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-3",
    ]
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        steps = conn.execute("SELECT DISTINCT step FROM rollouts ORDER BY step").fetchall()
    assert steps == [(0,), (1,), (2,)]


def test_resume_continues_from_the_last_checkpoint(tiny_model_dir, tool_bias, tmp_path):
    run_dir = tmp_path / "run"
    first = _session(tiny_model_dir, run_dir, tool_bias, max_steps=2)
    try:
        run(first)
    finally:
        first.close()
    second = _session(tiny_model_dir, run_dir, tool_bias, max_steps=4, resume=True)
    try:
        result = run(second)
    finally:
        second.close()
    assert result.steps == 4
    assert [step for step, _ in result.rewards()] == [1, 2, 3, 4]
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        batches = conn.execute("SELECT DISTINCT batch, step FROM rollouts ORDER BY batch").fetchall()
    assert batches == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_the_cli_trains_an_env_file_and_reports_the_curve(tiny_model_dir, tmp_path):
    from benchmax.cli import app

    run_dir = tmp_path / "cli-run"
    result = CliRunner().invoke(
        app,
        [
            "train", f"{ENV_FILE}:CalculatorEnv", "--model", str(tiny_model_dir), "--run-dir", str(run_dir),
            "--max-steps", "1", "--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "6",
            "--weight", "short=1", "--weight", "used_tool=0.5",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "trained 1 steps" in result.output
    assert (run_dir / "reward_curve.png").exists()
    bad = CliRunner().invoke(app, ["train", f"{ENV_FILE}:CalculatorEnv", "--weight", "short"])
    assert bad.exit_code != 0
    assert "COMPONENT=WEIGHT" in bad.output


def test_a_training_that_breaks_is_marked_failed_with_the_reason_not_left_running(tiny_model_dir, tool_bias, tmp_path):
    from transformers import TrainerCallback

    from benchmax.store import open_run

    class BreakAfterFirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            raise RuntimeError("the GPU fell off the bus")

    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=3)
    session.trainer.add_callback(BreakAfterFirstStep())
    try:
        with pytest.raises(RuntimeError, match="fell off the bus"):
            run(session)
    finally:
        session.close()
    with open_run(tmp_path / "run") as stored:
        assert stored.meta["kind"] == "train"
        assert stored.meta["status"] == "failed"
        assert stored.meta["error"] == "RuntimeError: the GPU fell off the bus"
        assert len(stored) == 8, "the step that ran is stored"
