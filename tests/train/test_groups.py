"""Dead groups: which groups teach nothing, which a step trains on, and the example draw."""

from __future__ import annotations

import pytest

from benchmax.envs import RolloutOutcome
from benchmax.train._groups import ExampleSampler, is_dead, rollout_score, select_groups


def _outcome(rewards, reason="finished"):
    return RolloutOutcome(rewards=rewards, termination_reason=reason)


def test_a_group_is_dead_when_every_sibling_scores_the_same_weighted_reward():
    weights = {"correct": 1.0, "format": 0.5}
    assert is_dead([_outcome({"correct": 1.0}), _outcome({"correct": 1.0})], weights, drop_unscorable=False)
    assert not is_dead([_outcome({"correct": 1.0}), _outcome({"correct": 0.0})], weights, drop_unscorable=False)
    # a component one sibling lacks counts 0 (the zero-fill), so this group has signal
    assert not is_dead(
        [_outcome({"correct": 1.0, "format": 1.0}), _outcome({"correct": 1.0})], weights, drop_unscorable=False
    )
    # a component with weight 0 is not trained on, so it gives no signal either
    assert is_dead(
        [_outcome({"correct": 0.0, "x": 1.0}), _outcome({"correct": 0.0, "x": 0.0})],
        {"correct": 1.0, "x": 0.0},
        drop_unscorable=False,
    )
    assert rollout_score(_outcome({"correct": 1.0, "format": 1.0}), weights) == 1.5


def test_operational_failures_count_zero_unless_dropped_then_a_group_needs_two_scored_siblings():
    failed = _outcome({}, reason="context_error")
    ok = _outcome({"correct": 1.0})
    assert not is_dead([ok, failed], {"correct": 1.0}, drop_unscorable=False)
    assert is_dead([ok, failed], {"correct": 1.0}, drop_unscorable=True)
    assert is_dead([failed, failed], {"correct": 1.0}, drop_unscorable=False)


def test_a_budget_stop_whose_reward_failed_is_dropped_like_any_failure():
    ok = _outcome({"correct": 1.0}, reason="max_turns_exceeded")
    broken = RolloutOutcome({}, "max_turns_exceeded", "compute_reward raised KeyError: 'x'", scoring_error="KeyError")
    assert not broken.scored
    assert is_dead([ok, broken], {"correct": 1.0}, drop_unscorable=True)
    assert is_dead([ok, _outcome({}, reason="max_turns_exceeded")], {"correct": 1.0}, drop_unscorable=True) is False


def test_drop_trains_on_live_groups_in_draw_order_and_masks_dead_fillers_only_when_short():
    dead = [True, False, True, False, False]
    assert select_groups(dead, 2, mode="drop").trained == (1, 3)
    assert select_groups(dead, 2, mode="drop").masked == ()
    short = select_groups([True, False, True], 3, mode="drop")
    assert short.trained == (1, 0, 2)
    assert short.masked == (0, 2)
    assert short.dead == (0, 2)
    keep = select_groups(dead, 2, mode="keep")
    assert keep.trained == (0, 1) and keep.masked == ()
    with pytest.raises(ValueError, match="'drop' or 'keep'"):
        select_groups(dead, 2, mode="skip")


def test_the_sampler_draws_every_example_once_per_epoch_reproducibly():
    ids = [f"e{index}" for index in range(5)]
    first = ExampleSampler(ids, seed=3)
    draws = [first.next() for _ in range(10)]
    assert sorted(draws[:5]) == sorted(draws[5:]) == ids
    again = ExampleSampler(ids, seed=3)
    assert [again.next() for _ in range(10)] == draws
    other = ExampleSampler(ids, seed=4)
    assert [other.next() for _ in range(10)] != draws
    assert first.drawn == 10
