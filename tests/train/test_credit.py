"""Credit per turn on a crafted batch: the advantages each mode gives every token, and the gradients.

One group of two rollouts, each two model turns with an env turn between them (template
and observation tokens, which no mode may credit). Turn rewards and outcomes are chosen
so the modes disagree: rollout A wins the outcome but earned nothing per turn, rollout B
loses the outcome but its first turn earned a turn reward.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from benchmax.envs import RolloutOutcome, TurnRecord
from benchmax.train._credit import token_advantages, turn_returns
from benchmax.train._sequences import assemble_sequences

PROMPT = (1, 2, 3)


def outcome(rollout_id: str, turns: list[tuple[tuple[int, ...], tuple[int, ...], dict | None]]) -> RolloutOutcome:
    """Turns as (observation glue before the turn, completion, turn rewards); prompts extend exactly."""
    records = []
    stream = list(PROMPT)
    for index, (glue, completion, rewards) in enumerate(turns):
        stream += glue
        records.append(
            TurnRecord(
                index=index,
                started_at=0.0,
                model_seconds=0.0,
                finish_reason="stop",
                prompt_token_ids=tuple(stream),
                completion_token_ids=completion,
                rewards=rewards,
            )
        )
        stream += completion
    return RolloutOutcome(rewards={}, termination_reason="finished", rollout_id=rollout_id, turns=tuple(records))


A = outcome("a", [((), (10, 11), {"step": 0.0}), ((90, 91, 92), (12, 13, 14), {"step": 0.0})])
B = outcome("b", [((), (20, 21), {"step": 1.0}), ((90, 91), (22, 23), {"step": 0.0})])
OUTCOMES = [A, B]
REWARDS = [1.0, 0.0]  # A solved it, B did not
SEQUENCES = [assemble_sequences(item)[0] for item in OUTCOMES]


def test_turn_spans_are_the_tokens_each_turn_sampled():
    a, b = SEQUENCES
    assert a.completion_ids == (10, 11, 90, 91, 92, 12, 13, 14)
    assert [a.completion_ids[start:end] for _, start, end in a.turn_spans] == [(10, 11), (12, 13, 14)]
    assert [b.completion_ids[start:end] for _, start, end in b.turn_spans] == [(20, 21), (22, 23)]
    assert a.env_mask == (1, 1, 0, 0, 0, 1, 1, 1)  # the env's observation is never trained on


def test_returns_add_the_turn_reward_the_discounted_later_ones_and_the_outcome():
    assert turn_returns([1.0, 0.0, 2.0], 10.0, 0.5) == [1.0 + 0.0 + 0.5 + 10.0, 0.0 + 1.0 + 10.0, 2.0 + 10.0]
    assert turn_returns([], 3.0, 1.0) == []


def test_outcome_mode_gives_every_token_of_a_rollout_trls_group_advantage():
    advantages = token_advantages(SEQUENCES, OUTCOMES, REWARDS, 2, mode="outcome")
    rewards = torch.tensor(REWARDS)
    trl = ((rewards - rewards.mean()) / (rewards.std() + 1e-4)).tolist()  # TRL's scale_rewards="group"
    assert advantages[0] == pytest.approx([trl[0]] * 8)
    assert advantages[1] == pytest.approx([trl[1]] * 6)


def test_per_turn_mode_credits_each_turn_its_own_return():
    advantages = token_advantages(SEQUENCES, OUTCOMES, REWARDS, 2, mode="per_turn", gamma=1.0)
    returns = [1.0, 1.0, 1.0, 0.0]  # A: 0+0+1, 0+1; B: 1+0+0, 0+0
    mean = sum(returns) / 4
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / 3) + 1e-4
    a0, a1, b0, b1 = ((r - mean) / std for r in returns)
    assert advantages[0] == pytest.approx([a0, a0, 0, 0, 0, a1, a1, a1])
    assert advantages[1] == pytest.approx([b0, b0, 0, 0, b1, b1])
    assert b0 > 0 > b1  # B's first turn earned its reward; in outcome mode all of B was pushed down


def test_a_discount_shrinks_what_a_later_turn_reward_gives_an_earlier_turn():
    late = outcome("c", [((), (1,), {"r": 0.0}), ((9,), (2,), {"r": 1.0})])
    early = outcome("d", [((), (3,), {"r": 0.0}), ((9,), (4,), {"r": 0.0})])
    sequences = [assemble_sequences(item)[0] for item in (late, early)]
    full = token_advantages(sequences, [late, early], [0.0, 0.0], 2, mode="per_turn", gamma=1.0, scale=False)
    half = token_advantages(sequences, [late, early], [0.0, 0.0], 2, mode="per_turn", gamma=0.5, scale=False)
    # returns: gamma 1 -> late [1, 1], early [0, 0] (mean 0.5); gamma 0.5 -> late [0.5, 1] (mean 0.375)
    assert (full[0][0], full[0][2]) == pytest.approx((0.5, 0.5))  # [turn 0, glue, turn 1]
    assert (half[0][0], half[0][2]) == pytest.approx((0.125, 0.625))


def test_an_unscored_rollout_gets_no_credit_and_leaves_the_baseline():
    advantages = token_advantages(SEQUENCES, OUTCOMES, [1.0, None], 2, mode="per_turn", scale=False)
    assert advantages[1] == [0.0] * 6
    assert advantages[0] == pytest.approx([0.0, 0.0, 0, 0, 0, 0.0, 0.0, 0.0])  # A alone: its own mean


@pytest.mark.parametrize("mode", ["outcome", "per_turn"])
def test_the_gradient_of_each_token_follows_its_advantage(mode):
    """The policy-gradient loss -sum(A_t * log p(token_t)) over trained tokens, on per-token logits."""
    advantages = token_advantages(SEQUENCES, OUTCOMES, REWARDS, 2, mode=mode)
    grads = []
    for sequence, row in zip(SEQUENCES, advantages, strict=True):
        logits = torch.zeros(len(sequence.completion_ids), 128, requires_grad=True)
        logps = torch.log_softmax(logits, dim=-1)[torch.arange(len(row)), torch.tensor(sequence.completion_ids)]
        mask = torch.tensor(sequence.env_mask, dtype=torch.float32)
        loss = -(torch.tensor(row) * logps * mask).sum()
        loss.backward()
        # d loss / d logit of the sampled token = -A_t * (1 - p) with p = 1/128 at uniform logits
        grads.append([float(logits.grad[t, token]) for t, token in enumerate(sequence.completion_ids)])
    scale = 1 - 1 / 128
    for row, grad, sequence in zip(advantages, grads, SEQUENCES, strict=True):
        expected = [-a * scale * m for a, m in zip(row, sequence.env_mask, strict=True)]
        assert grad == pytest.approx(expected, abs=1e-6)
    a_turns = [grads[0][start] for _, start, _ in SEQUENCES[0].turn_spans]
    b_turns = [grads[1][start] for _, start, _ in SEQUENCES[1].turn_spans]
    if mode == "outcome":
        assert a_turns[0] == a_turns[1] < 0 < b_turns[0] == b_turns[1]  # A's tokens all pushed up, B's all down
    else:
        assert b_turns[0] < 0 < b_turns[1]  # B's rewarded first turn is pushed up, its second down


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"credit": "per-step"}, "credit must be 'outcome' or 'per_turn'"),
        ({"credit": "per_turn", "turn_discount": 1.5}, "turn_discount must be in [0, 1]"),
    ],
)
def test_an_unknown_credit_mode_or_discount_is_refused_before_training(changes, message):
    from benchmax.train import TrainConfig, TrainError

    with pytest.raises(TrainError, match=re.escape(message)):
        TrainConfig(env="examples/guess_number", **changes)


def test_token_advantages_refuse_an_unknown_mode():
    with pytest.raises(ValueError, match="credit must be one of outcome, per_turn"):
        token_advantages(SEQUENCES, OUTCOMES, REWARDS, 2, mode="per_step")
