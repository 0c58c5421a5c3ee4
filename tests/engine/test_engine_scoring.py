"""Individual and group scoring: what is scored, what each hook sees, and hook failures."""

from __future__ import annotations

import math
from contextlib import asynccontextmanager

import pytest

from benchmax.envs import BaseEnv, Example, ListDataset, RolloutFailure, canonical_example_id


class GroupEnv(BaseEnv):
    """Scores each rollout by id; a test sets what either hook does per rollout."""

    max_turns = 2

    def __init__(self, reward=None, group=None, fail_ids=(), **kwargs) -> None:
        super().__init__(**kwargs)
        self.reward = reward or (lambda rollout: {"own": 1.0})
        self.group = group or (lambda rollouts: [{"rank": float(i)} for i in range(len(rollouts))])
        self.fail_ids = set(fail_ids)
        self.group_calls: list[list[str]] = []
        self.reward_calls: list[str] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if rollout_id in self.fail_ids:
            raise RolloutFailure("sandbox_error", f"no sandbox for {rollout_id}")
        yield

    async def compute_reward(self, rollout):
        self.reward_calls.append(rollout.rollout_id)
        return self.reward(rollout)

    async def compute_group_rewards(self, rollouts):
        self.group_calls.append([rollout.rollout_id for rollout in rollouts])
        return self.group(rollouts)


def shared_example(text: str = "q", steps: str = '[{"content": "answer"}]') -> Example:
    payload = {
        "prompt_messages": [{"role": "user", "content": f"{text}\n#script: {steps}"}],
        "answer": "answer",
    }
    return Example(canonical_example_id(payload), payload)


async def run_group(make_engine, make_request, env, ids=("a", "b", "c"), example=None):
    example = example or shared_example()
    engine = make_engine(env)
    result = await engine.run_group([make_request(rollout_id=i, example=example) for i in ids])
    return result


async def test_individual_and_group_rewards_are_merged_per_rollout(make_engine, make_request):
    result = await run_group(make_engine, make_request, GroupEnv())
    assert [o.rewards for o in result.outcomes] == [
        {"own": 1.0, "rank": 0.0},
        {"own": 1.0, "rank": 1.0},
        {"own": 1.0, "rank": 2.0},
    ]
    assert [o.rollout_id for o in result.outcomes] == ["a", "b", "c"]
    assert result.by_id()["b"].termination_reason == "finished"


async def test_group_rewards_may_be_keyed_by_rollout_id(make_engine, make_request):
    env = GroupEnv(group=lambda rollouts: {"c": {"win": 1.0}, "a": {"win": 0.0}, "b": {}})
    result = await run_group(make_engine, make_request, env)
    assert [o.rewards for o in result.outcomes] == [
        {"own": 1.0, "win": 0.0},
        {"own": 1.0},
        {"own": 1.0, "win": 1.0},
    ]


async def test_a_group_mapping_that_misses_a_rollout_fails_the_group_as_0_2_does(make_engine, make_request):
    env = GroupEnv(group=lambda rollouts: {"c": {"win": 1.0}, "a": {"win": 0.0}})
    result = await run_group(make_engine, make_request, env)
    assert {o.termination_reason for o in result.outcomes} == {"group_reward_error"}
    assert all("missing=['b']" in (o.error or "") for o in result.outcomes)
    assert all(o.rewards == {} for o in result.outcomes)


async def test_the_group_hook_runs_once_after_all_siblings_and_sees_their_transcripts(make_engine, make_request):
    seen = []

    def group(rollouts):
        seen.extend((r.rollout_id, r.messages[-1]["content"], dict(r.rewards)) for r in rollouts)
        return None

    env = GroupEnv(group=group)
    await run_group(make_engine, make_request, env)
    assert env.group_calls == [["a", "b", "c"]]
    assert sorted(env.reward_calls) == ["a", "b", "c"]
    assert seen == [(i, "answer", {"own": 1.0}) for i in ("a", "b", "c")]


async def test_the_group_hook_gets_only_scorable_siblings(make_engine, make_request):
    def reward(rollout):
        if rollout.rollout_id == "b":
            raise KeyError("missing field")
        return {"own": 1.0}

    env = GroupEnv(reward=reward, fail_ids={"d"})
    result = await run_group(make_engine, make_request, env, ids=("a", "b", "c", "d"))
    assert env.group_calls == [["a", "c"]]
    by_id = result.by_id()
    assert by_id["a"].rewards == {"own": 1.0, "rank": 0.0}
    assert by_id["c"].rewards == {"own": 1.0, "rank": 1.0}
    assert (by_id["b"].termination_reason, by_id["b"].rewards) == ("reward_error", {})
    assert by_id["b"].error == "compute_reward raised KeyError: 'missing field'"
    assert (by_id["d"].termination_reason, by_id["d"].rewards) == ("sandbox_error", {})
    assert by_id["d"].error == "no sandbox for d"


async def test_the_group_hook_is_skipped_when_no_sibling_is_scorable(make_engine, make_request):
    env = GroupEnv(fail_ids={"a", "b"})
    result = await run_group(make_engine, make_request, env, ids=("a", "b"))
    assert env.group_calls == []
    assert {o.termination_reason for o in result.outcomes} == {"sandbox_error"}
    assert result.logs == ()


async def test_budget_stops_reach_both_hooks(make_engine, make_request):
    example = shared_example(steps='[{"content": "cut", "finish_reason": "length"}]')
    env = GroupEnv()
    result = await run_group(make_engine, make_request, env, ids=("a", "b"), example=example)
    assert env.group_calls == [["a", "b"]]
    assert [o.termination_reason for o in result.outcomes] == ["output_exceeded"] * 2
    assert all(o.rewards["own"] == 1.0 for o in result.outcomes)


async def test_a_key_from_both_hooks_is_a_group_reward_error(make_engine, make_request):
    env = GroupEnv(group=lambda rollouts: [{"own": 2.0} for _ in rollouts], fail_ids={"c"})
    result = await run_group(make_engine, make_request, env)
    by_id = result.by_id()
    for rollout_id in ("a", "b"):
        assert by_id[rollout_id].termination_reason == "group_reward_error"
        assert by_id[rollout_id].rewards == {}
        assert "both produced ['own']" in by_id[rollout_id].error
    assert by_id["c"].termination_reason == "sandbox_error"
    assert [entry.level for entry in result.logs] == ["ERROR"]


async def test_a_group_hook_exception_fails_the_scorable_siblings_and_is_logged_with_the_group(
    make_engine, make_request
):
    def group(rollouts):
        raise ZeroDivisionError("no winner")

    env = GroupEnv(group=group)
    result = await run_group(make_engine, make_request, env)
    assert {o.termination_reason for o in result.outcomes} == {"group_reward_error"}
    assert all(o.rewards == {} for o in result.outcomes)
    assert result.outcomes[0].error == "compute_group_rewards raised ZeroDivisionError: no winner"
    (entry,) = result.logs
    assert entry.phase == "group_reward"
    assert "ZeroDivisionError: no winner" in entry.traceback
    assert all(not [e for e in o.logs if e.level == "ERROR"] for o in result.outcomes)


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        ([{"rank": 1.0}], "returned 1 reward dicts for 3 rollouts"),
        ({"zzz": {"rank": 1.0}}, "misaligned rollout ids: missing=['a', 'b', 'c'], unknown=['zzz']"),
        ([{"rank": math.nan}] * 3, "'rank'=nan; rewards must be finite"),
        ([{"rank": "high"}] * 3, "'rank'='high' (str); rewards must be numbers"),
        (42, "must return {rollout_id: rewards} or a list of reward dicts, got int"),
    ],
)
async def test_an_unusable_group_result_is_a_group_reward_error_naming_the_problem(
    make_engine, make_request, returned, says
):
    env = GroupEnv(group=lambda rollouts: returned)
    result = await run_group(make_engine, make_request, env)
    assert {o.termination_reason for o in result.outcomes} == {"group_reward_error"}
    assert says in result.outcomes[0].error
    assert all(o.rewards == {} for o in result.outcomes)


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        ({"score": math.nan}, "'score'=nan; rewards must be finite"),
        ({"score": math.inf}, "'score'=inf; rewards must be finite"),
        ({"score": -math.inf}, "'score'=-inf; rewards must be finite"),
        ({"score": "1.0"}, "'score'='1.0' (str); rewards must be numbers"),
        ({"score": None}, "'score'=None (NoneType); rewards must be numbers"),
        ({"": 1.0}, "keys must be non-empty strings"),
        ({1: 1.0}, "keys must be non-empty strings"),
        ([1.0], "must return a dict of {component: number}, got list"),
        (0.5, "must return a dict of {component: number}, got float"),
    ],
)
async def test_a_non_finite_or_non_numeric_reward_is_a_reward_error_naming_the_key(
    make_engine, make_request, returned, says
):
    def reward(rollout):
        return returned if rollout.rollout_id == "a" else {"score": 1}

    env = GroupEnv(reward=reward, group=lambda rollouts: None)
    result = await run_group(make_engine, make_request, env, ids=("a", "b"))
    a, b = result.outcomes
    assert (a.termination_reason, a.rewards) == ("reward_error", {})
    assert says in a.error
    assert (b.termination_reason, b.rewards) == ("finished", {"score": 1.0})
    assert env.group_calls == [["b"]]


async def test_int_and_bool_rewards_become_floats(make_engine, make_request):
    env = GroupEnv(reward=lambda rollout: {"int": 2, "bool": True, "float": 0.25})
    result = await run_group(make_engine, make_request, env, ids=("a",))
    rewards = result.outcomes[0].rewards
    assert rewards == {"int": 2.0, "bool": 1.0, "float": 0.25, "rank": 0.0}
    assert all(type(value) is float for value in rewards.values())


async def test_rollout_failure_in_compute_reward_ends_with_its_reason(make_engine, make_request):
    def reward(rollout):
        raise RolloutFailure("judge_error", "the judge returned garbage")

    env = GroupEnv(reward=reward)
    result = await run_group(make_engine, make_request, env, ids=("a",))
    (outcome,) = result.outcomes
    assert (outcome.termination_reason, outcome.error, outcome.rewards) == (
        "judge_error",
        "the judge returned garbage",
        {},
    )
    assert env.group_calls == []


async def test_the_rollout_view_carries_example_args_split_and_turns(make_engine, make_request):
    seen = {}

    def reward(rollout):
        seen.update(
            args=dict(rollout.example_args),
            split=rollout.split,
            reason=rollout.termination_reason,
            turns=len(rollout.turns),
            example_id=rollout.example_id,
            prompt=rollout.messages[0]["role"],
        )
        return {}

    example = shared_example()
    env = GroupEnv(reward=reward, group=lambda rollouts: None)
    engine = make_engine(env)
    result = await engine.run_group([make_request(example=example, split="eval")])
    assert seen == {
        "args": {"answer": "answer"},
        "split": "eval",
        "reason": "finished",
        "turns": 1,
        "example_id": example.id,
        "prompt": "user",
    }
    assert result.outcomes[0].rewards == {}
    assert result.outcomes[0].split == "eval"
