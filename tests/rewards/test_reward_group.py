import pytest

from benchmax.envs import BaseRollout
from benchmax.rewards import (
    diversity_scale,
    listwise_rank_rewards,
    ngram_clusters,
    normalize_group,
    order_to_ranks,
    pairwise_win_rates,
    per_rollout,
    rank_to_reward,
    scores_to_ranks,
)


def _rollout(rollout_id):
    return BaseRollout(
        rollout_id=rollout_id, messages=[], example_args={}, split="train", termination_reason="completed"
    )


def test_per_rollout_builds_the_group_hook_return_value():
    rollouts = [_rollout("a"), _rollout("b")]
    assert per_rollout(rollouts, win=[1, 0.5], div=[0.2, 0.3]) == {
        "a": {"win": 1.0, "div": 0.2},
        "b": {"win": 0.5, "div": 0.3},
    }
    with pytest.raises(ValueError, match="'win' has 1 values for 2 rollouts"):
        per_rollout(rollouts, win=[1.0])


def test_scores_to_ranks_averages_ties():
    assert scores_to_ranks([0.2, 0.9, 0.2, 0.5]) == [2.5, 0.0, 2.5, 1.0]
    assert scores_to_ranks([3, 1, 2], higher_is_better=False) == [2.0, 0.0, 1.0]


def test_rank_to_reward_maps_ranks_linearly():
    assert rank_to_reward([0, 1, 2]) == [1.0, 0.5, 0.0]
    assert rank_to_reward([1.5, 0, 1.5, 3]) == [0.5, 1.0, 0.5, 0.0]
    assert rank_to_reward([0, 1], best=1.0, worst=-1.0) == [1.0, -1.0]
    assert rank_to_reward([0]) == [1.0]
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        rank_to_reward([0, 2])


def test_order_to_ranks_inverts_a_best_first_order():
    assert order_to_ranks([2, 0, 1]) == [1.0, 2.0, 0.0]


def test_ngram_clusters_group_near_copies():
    texts = [
        "the answer is forty two because six times seven",
        "The answer is forty-two, because six times seven!",
        "i think it is seven since the square root of forty nine",
        "the answer is forty two because six times seven indeed",
        "",
        "",
    ]
    assert ngram_clusters(texts) == [0, 0, 2, 0, 4, 4]
    assert ngram_clusters(["a b", "a b"], n=3) == [0, 0]


def test_diversity_scale_shares_credit_among_copies_and_leaves_penalties():
    texts = ["x y z w", "x y z w", "other words entirely here", "x y z w"]
    assert diversity_scale([1.0, 0.6, 1.0, -0.5], texts) == pytest.approx([1 / 3, 0.2, 1.0, -0.5])
    with pytest.raises(ValueError, match="2 rewards for 1 texts"):
        diversity_scale([1.0, 1.0], ["a"])


def test_normalize_group_methods():
    values = [1.0, 2.0, 3.0]
    assert normalize_group(values) == pytest.approx([-1.2247449, 0.0, 1.2247449])
    assert normalize_group(values, method="center") == [-1.0, 0.0, 1.0]
    assert normalize_group(values, method="minmax") == [0.0, 0.5, 1.0]
    assert normalize_group(values, method="rank") == [0.0, 0.5, 1.0]
    assert normalize_group([2.0, 2.0]) == [0.0, 0.0]
    assert normalize_group([2.0, 2.0], method="minmax") == [0.5, 0.5]
    assert normalize_group([2.0, 2.0], method="rank") == [0.5, 0.5]
    assert normalize_group([]) == []
    with pytest.raises(ValueError, match="unknown method"):
        normalize_group(values, method="softmax")  # type: ignore[arg-type]


async def test_pairwise_win_rates_play_every_ordered_pair(judge, judge_server):
    server = judge_server
    rates = await pairwise_win_rates(judge, ["3", "9", "5", "5"], prompt="biggest?")
    assert rates == [0.0, 1.0, 0.5, 0.5]
    assert server.counts["requests"] == 12
    assert await pairwise_win_rates(judge, ["1"]) == [0.5]


async def test_pairwise_win_rates_can_play_each_pair_once(judge, judge_server):
    server = judge_server
    assert await pairwise_win_rates(judge, ["3", "9", "5"], both_orders=False) == [0.0, 1.0, 0.5]
    assert server.counts["requests"] == 3


async def test_listwise_rank_rewards_map_the_judges_ranking(judge, judge_server):
    server = judge_server
    assert await listwise_rank_rewards(judge, ["3", "9", "5"]) == [0.0, 1.0, 0.5]
    assert server.counts["requests"] == 1
