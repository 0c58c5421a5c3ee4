"""GRPO through TRL on a multi-turn tool env, with a tiny random policy."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import orjson
import pytest
import torch
from calculator_env import CalculatorEnv
from typer.testing import CliRunner

from benchmax.envs import BaseEnv, ListDataset
from benchmax.store import DB_NAME, Run
from benchmax.train import TrainConfig, TrainError, build, run

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
    session = _session(
        tiny_model_dir, tmp_path / "run", tool_bias, max_steps=3, drop_unscorable=True, dead_groups="keep"
    )
    trainer = session.trainer
    assert session.bridge.group_size == trainer.args.num_generations == session.config.group_size == 4
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
    # one row per step under a header, not TRL's metric dict
    assert "IS ratio" in result.output and "dead" in result.output
    assert "{'loss'" not in result.output
    assert (run_dir / "reward_curve.png").exists()
    bad = CliRunner().invoke(app, ["train", f"{ENV_FILE}:CalculatorEnv", "--weight", "short"])
    assert bad.exit_code != 0
    assert "COMPONENT=WEIGHT" in bad.output


def _metrics(run_dir):
    lines = (run_dir / "metrics.jsonl").read_bytes().splitlines()
    return [entry for entry in (orjson.loads(line) for line in lines if line.strip()) if "reward" in entry]


def test_async_training_is_importance_corrected_and_every_step_is_recorded_in_the_run(
    tiny_model_dir, tool_bias, tmp_path
):
    torch.manual_seed(0)
    session = _session(
        tiny_model_dir, tmp_path / "run", tool_bias, max_steps=3, async_steps=1, learning_rate=2e-2
    )
    trainer = session.trainer
    weighed = []
    original = trainer._compute_loss

    def spy(model, inputs):
        loss = original(model, inputs)
        weighed.append((inputs["advantages"].detach().clone(), inputs["benchmax_advantages"].detach().clone()))
        return loss

    trainer._compute_loss = spy
    try:
        result = run(session)
    finally:
        session.close()
    assert result.steps == 3
    logged = _metrics(result.run_dir)
    for entry in logged:
        for key in ("is_ratio/mean", "is_ratio/min", "is_ratio/max", "kl/sampler", "groups/dead_share"):
            assert key in entry, key
        assert entry["policy/staleness_max"] <= 1
    # the first step trains on rollouts of its own weights; later ones on one-step-old ones
    assert abs(logged[0]["is_ratio/mean"] - 1.0) < 1e-3
    assert any(abs(entry["is_ratio/max"] - 1.0) > 1e-3 for entry in logged[1:])
    for weighted, plain in weighed:
        assert weighted.dim() == 2 and plain.dim() == 1
        factor = weighted[plain != 0] / plain[plain != 0].unsqueeze(1)
        assert (factor >= 0).all() and (factor <= 3.0 + 1e-6).all()  # truncated at TRL's default cap
    with Run(result.run_dir) as stored:
        steps = stored.steps()
        turns = [turn for rollout in stored.rollouts() for turn in rollout.turns]
    assert [step for step, _, _ in steps] == [0, 1, 2]
    assert all("is_ratio/mean" in metrics and metrics["trainer_step"] == step + 1 for step, _, metrics in steps)
    assert turns and all(turn.policy_version is not None for turn in turns)
    assert {p.name for p in (result.run_dir / "curves").iterdir()} >= {
        "reward.png",
        "short.png",
        "used_tool.png",
        "dead_groups.png",
        "is_kl.png",
    }


def test_synchronous_in_process_rollouts_carry_the_logprobs_the_trainer_computes(tiny_model_dir, tool_bias, tmp_path):
    torch.manual_seed(0)
    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=2, async_steps=0)
    try:
        result = run(session)
    finally:
        session.close()
    for entry in _metrics(result.run_dir):
        assert entry["tokens/logprob_diff_max"] < 1e-3
        assert entry["policy/staleness_max"] == 0
        assert entry["tokens/mismatch"] == 0


def test_eval_before_and_after_training_go_through_the_runners_eval_path(tiny_model_dir, tool_bias, tmp_path):
    torch.manual_seed(0)
    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=2, eval_group_size=2)
    try:
        result = run(session)
    finally:
        session.close()
    assert result.eval_before is not None and result.eval_after is not None
    for summary, step in ((result.eval_before, 0), (result.eval_after, 2)):
        assert summary.run_dir == result.run_dir / f"eval-step{step}"
        with Run(summary.run_dir) as stored:
            assert stored.meta["kind"] == "eval" and stored.meta["status"] == "completed"
            rollouts = list(stored.rollouts())
        assert len(rollouts) == summary.rollouts == 4 * 2
        assert {rollout.split for rollout in rollouts} == {"eval"}
        assert set(summary.means) >= {"short"}
    with Run(result.run_dir) as stored:
        assert set(stored.meta["evals"]) == {"eval-step0", "eval-step2"}


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


def test_by_default_generation_runs_one_step_ahead_from_a_copy_and_the_run_records_it(
    tiny_model_dir, tool_bias, tmp_path
):
    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=1)
    try:
        assert session.config.async_steps == 1
        # the trainer updates its model while the policy generates the next step from a copy
        assert session.policy.model is not session.trainer.model
        run(session)
    finally:
        session.close()
    with Run(tmp_path / "run") as stored:
        assert stored.meta["train"]["async_steps"] == 1


def test_several_passes_per_batch_train_synchronously_by_default_and_refuse_an_explicit_k(
    tiny_model_dir, tool_bias, tmp_path, caplog
):
    caplog.set_level("INFO", logger="benchmax.train")
    session = _session(tiny_model_dir, tmp_path / "run", tool_bias, max_steps=1, trl_args={"num_iterations": 2})
    try:
        assert session.config.async_steps == 0
        assert session.policy.model is session.trainer.model
        result = run(session)
    finally:
        session.close()
    assert result.steps == 1
    said = [record.getMessage() for record in caplog.records]
    assert any("async_steps=0" in line and "num_iterations" in line for line in said)
    with pytest.raises(TrainError, match="num_iterations"):
        TrainConfig(trl_args={"num_iterations": 2}, async_steps=1)


def test_the_group_size_is_one_value_that_trl_args_cannot_set_a_second_time():
    """``--group-size`` sets TRL's ``num_generations``; a second, different value would split the groups wrongly."""
    with pytest.raises(TrainError, match="num_generations: it is the group size"):
        TrainConfig(group_size=4, trl_args={"num_generations": 2})


class _LateComponentEnv(BaseEnv):
    """``late`` only on the second example: the probe group (the first example) never sees it.

    Both components score the sibling's index mod 2, so every group is live and the
    step's mean reward says exactly which components TRL summed."""

    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(
            [
                {"prompt_messages": [{"role": "user", "content": f"what is two plus {word}"}], "late": late}
                for word, late in (("three", False), ("five", True))
            ]
        )

    async def compute_reward(self, rollout):
        sibling = float(int(re.search(r"(\d+)$", rollout.rollout_id)[1]) % 2)  # "<group>#1", "probe-1"
        return {"score": sibling, "late": sibling} if rollout.example_args["late"] else {"score": sibling}


def test_a_component_no_probe_rollout_emitted_is_trained_on_from_the_step_it_appears(
    tiny_model_dir, tmp_path, caplog
):
    caplog.set_level("INFO", logger="benchmax.train")
    session = build(
        _LateComponentEnv(),
        model=str(tiny_model_dir),
        run_dir=tmp_path / "run",
        group_size=2,
        prompts_per_step=2,
        max_tokens=4,
        max_steps=2,
        async_steps=0,
        seed=0,
    )
    assert session.components == ("score",)  # what the probe saw
    try:
        result = run(session)
    finally:
        session.close()

    assert result.components == ("score", "late")
    assert session.trainer.reward_weights.tolist() == [1.0, 1.0]
    steps = [entry for entry in result.log_history if "reward" in entry]
    assert len(steps) == 2
    for entry in steps:
        # each step draws both examples: score [0, 1] [0, 1], late [0, 0 filled] [0, 1]
        assert entry["rewards/late/mean"] == pytest.approx(0.25)
        assert entry["reward"] == pytest.approx(0.5 + 0.25)  # late is in the sum, with weight 1
    said = [record.getMessage() for record in caplog.records if "new reward component" in record.getMessage()]
    assert len(said) == 1 and "'late'" in said[0] and "at step 1 " in said[0], said
    assert not any("not trained on" in record.getMessage() for record in caplog.records)
