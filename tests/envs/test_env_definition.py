"""What makes an env class valid: a scoring hook, usable limits, valid tool schemas."""

from __future__ import annotations

import pytest

import benchmax.envs
from benchmax.envs import BaseEnv, EnvDefinitionError, ListDataset, check_env_definition


class _Dataset:
    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([{"prompt_messages": [{"role": "user", "content": "q"}]}])


class Scored(_Dataset, BaseEnv):
    max_turns = 2

    async def compute_reward(self, rollout):
        return {"ok": 1.0}


class GroupOnly(_Dataset, BaseEnv):
    max_turns = 1

    async def compute_group_rewards(self, rollouts):
        return [{"rank": 1.0} for _ in rollouts]


def test_everything_the_contract_names_is_importable_from_benchmax_envs():
    for name in (
        "BaseEnv",
        "BaseRollout",
        "DatasetSplit",
        "JsonlDataset",
        "Tool",
        "Dataset",
        "Example",
        "canonical_example_id",
        "Environment",
        "RolloutRequest",
        "RolloutOutcome",
        "RolloutFailure",
        "ToolError",
        "StaticBearerAuth",
        "TerminationReason",
    ):
        assert hasattr(benchmax.envs, name), name
        assert name in benchmax.envs.__all__, name
    from benchmax.rewards import extract_completion_text

    assert extract_completion_text([{"role": "assistant", "content": "hi"}]) == "hi"


def test_an_env_with_neither_scoring_hook_is_rejected_before_any_model_call():
    class NoScore(_Dataset, BaseEnv):
        max_turns = 1

    env = NoScore()  # constructible, as in 0.2.x; the engine checks it before the first rollout
    with pytest.raises(EnvDefinitionError, match="NoScore implements neither compute_reward nor"):
        check_env_definition(env)


def test_either_scoring_hook_alone_is_enough():
    assert Scored().max_turns == 2
    assert GroupOnly().max_turns == 1


def test_max_turns_can_come_from_the_constructor():
    class NoClassLimit(_Dataset, BaseEnv):
        async def compute_reward(self, rollout):
            return {}

    assert NoClassLimit(max_turns=5).max_turns == 5
    assert Scored(max_turns=7, max_tool_calls=3).max_tool_calls == 3
    assert Scored.max_turns == 2


def test_a_missing_max_turns_says_how_to_set_it():
    class NoLimit(_Dataset, BaseEnv):
        async def compute_reward(self, rollout):
            return {}

    env = NoLimit()
    with pytest.raises(EnvDefinitionError, match=r"NoLimit\.max_turns is not set.*max_turns=N"):
        check_env_definition(env)


def test_max_turns_may_be_set_after_super_init():
    class Late(_Dataset, BaseEnv):
        def __init__(self, turns: int) -> None:
            super().__init__()
            self.max_turns = turns

        async def compute_reward(self, rollout):
            return {}

    env = Late(3)
    check_env_definition(env)
    assert env.max_turns == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_turns_must_be_a_positive_int(bad):
    class Bad(Scored):
        max_turns = bad

    with pytest.raises(EnvDefinitionError, match=r"Bad\.max_turns must be a positive int"):
        Bad()


@pytest.mark.parametrize("bad", [-1, 2.0, False, "1"])
def test_max_tool_calls_must_be_a_non_negative_int_or_none(bad):
    with pytest.raises(EnvDefinitionError, match=r"Scored\.max_tool_calls must be an int >= 0"):
        Scored(max_tool_calls=bad)


def test_max_tool_calls_zero_and_none_are_valid():
    assert Scored(max_tool_calls=0).max_tool_calls == 0
    assert Scored().max_tool_calls is None


async def test_an_env_that_skips_base_init_is_still_checked_before_any_request(
    make_engine, make_request, scripted_server
):
    class SkipsInit(_Dataset, BaseEnv):
        max_turns = 1

        def __init__(self) -> None:
            pass

    with pytest.raises(EnvDefinitionError, match="implements neither"):
        await make_engine(SkipsInit()).run_group([make_request([{"content": "x"}])])
    assert scripted_server.requests == []
