"""Training an env that drives its turns: per-turn credit reaches TRL's loss token by token."""

from __future__ import annotations

import pytest
import torch
from turn_env import TurnCreditEnv

from benchmax.train import build, run
from benchmax.train._credit import token_advantages


def _train(model_dir, run_dir, credit):
    torch.manual_seed(0)
    session = build(
        TurnCreditEnv(),
        model=str(model_dir),
        run_dir=run_dir,
        group_size=4,
        prompts_per_step=2,
        max_tokens=6,
        learning_rate=1e-3,
        save_steps=100,
        seed=0,
        max_steps=2,
        credit=credit,
        dead_groups="keep",
    )
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
    moved = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))
    return result, seen, moved


def test_per_turn_credit_gives_each_turn_s_tokens_its_own_advantage(tiny_model_dir, tmp_path):
    result, seen, moved = _train(tiny_model_dir, tmp_path / "run", "per_turn")
    assert result.steps == 2 and moved
    two_turns = 0
    for batch, output in seen:
        advantages = output["advantages"]
        assert advantages.dim() == 2  # per token, not per rollout
        rewards = [batch.rewards[i]["score"] for i in range(len(batch.outcomes))]
        expected = token_advantages(batch.sequences, batch.outcomes, rewards, 4, mode="per_turn")
        for row, (sequence, values) in enumerate(zip(batch.sequences, expected, strict=True)):
            width = len(sequence.completion_ids)
            assert advantages[row, :width].tolist() == pytest.approx(values, abs=1e-5)
            assert not advantages[row, width:].any()
            glue = [t for t, trained in enumerate(sequence.env_mask) if not trained]
            assert all(advantages[row, t].item() == 0.0 for t in glue)  # the env's "go on" earns nothing
            if len(sequence.turn_spans) == 2:
                two_turns += 1
                (_, a0, _), (_, b0, _) = sequence.turn_spans
                # the first turn's return holds its turn reward (1.0) on top of the second's
                assert advantages[row, a0].item() > advantages[row, b0].item()
    assert two_turns, "no rollout reached its second turn"
    steps = [entry for entry in result.log_history if "reward" in entry]
    assert steps


def test_outcome_credit_keeps_trls_advantage_per_rollout_and_logs_turn_rewards(tiny_model_dir, tmp_path):
    result, seen, _moved = _train(tiny_model_dir, tmp_path / "run", "outcome")
    for batch, output in seen:
        assert output["advantages"].dim() == 1  # one per rollout: turn rewards do not reach the loss
        rewards = [batch.rewards[i]["score"] for i in range(len(batch.outcomes))]
        expected = token_advantages(batch.sequences, batch.outcomes, rewards, 4, mode="outcome")
        assert output["advantages"].tolist() == pytest.approx([values[0] for values in expected], abs=1e-5)
    from benchmax.store import Run

    with Run(result.run_dir) as run_:
        metrics = [metrics for _, _, metrics in run_.steps()]
    assert all(metrics_["turn_rewards/step"] >= 0.0 for metrics_ in metrics)
    assert any("turns/mean" in metrics_ for metrics_ in metrics)
