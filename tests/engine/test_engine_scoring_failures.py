"""A scoring failure is a failure, whatever the termination reason says (issue #30.1).

The matrix: every termination reason x every way a scoring hook can fail, for
the individual hook (``compute_reward``) and the group hook
(``compute_group_rewards``), driven end to end against the scripted server. A
budget stop keeps its reason when its scoring fails (0.2.x's rule), so only
``scoring_error`` tells it from a scored budget stop: the outcome must be
unscored, carry no component, and say why.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchmax.auth import InjectedAuth, StaticBearerAuth, bind_model_auth
from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import (
    MAX_REWARD_COMPONENTS,
    MAX_REWARD_NAME_CHARS,
    BaseEnv,
    Environment,
    ListDataset,
    RolloutFailure,
    TerminationReason,
    is_scored,
    settle_termination_reason,
)
from benchmax.envs.shared_types import RolloutAttempt, RolloutOutcome

FAST_RETRY = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)
STEP = {"tool_calls": [{"name": "step"}]}
CONTEXT_REFUSAL = {
    "object": "error",
    "message": "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}

# termination reason -> (script, max_tool_calls)
ENDINGS: dict[str, tuple[list[dict[str, Any]], int | None]] = {
    "finished": ([{"content": "done"}], None),
    "max_turns_exceeded": ([STEP, STEP], None),
    "tool_budget_exceeded": ([STEP], 0),
    "output_exceeded": ([{"content": "a long answ", "finish_reason": "length"}], None),
    "context_exceeded": ([STEP, {"status": 400, "body": CONTEXT_REFUSAL}], None),
}


def _raise(_: Any) -> Any:
    raise KeyError("missing field")


def _judge_down(_: Any) -> Any:
    raise RolloutFailure("judge_error", "the judge answered off-schema")


# failure -> (what the hook returns given its input, the reason a clean finish gets, text in the error)
INDIVIDUAL_FAILURES: dict[str, tuple[Any, str, str]] = {
    "raise": (_raise, "reward_error", "compute_reward raised KeyError"),
    "non_number": (lambda rollout: {"score": "1.0"}, "reward_error", "rewards must be numbers"),
    "not_a_dict": (lambda rollout: "1.0", "reward_error", "must return a dict"),
    "nan": (lambda rollout: {"score": math.nan}, "reward_error", "rewards must be finite"),
    "rollout_failure": (_judge_down, "judge_error", "the judge answered off-schema"),
    "too_many_components": (
        lambda rollout: {f"c{i}": 0.0 for i in range(MAX_REWARD_COMPONENTS + 1)},
        "reward_error",
        f"more than the {MAX_REWARD_COMPONENTS} allowed",
    ),
    "key_too_long": (
        lambda rollout: {"k" * (MAX_REWARD_NAME_CHARS + 1): 1.0},
        "reward_error",
        f"more than the {MAX_REWARD_NAME_CHARS} allowed",
    ),
}

GROUP_FAILURES: dict[str, tuple[Any, str, str]] = {
    "raise": (_raise, "group_reward_error", "compute_group_rewards raised KeyError"),
    "non_number": (lambda rollouts: [{"rank": "first"} for _ in rollouts], "group_reward_error", "must be numbers"),
    "nan": (lambda rollouts: [{"rank": math.nan} for _ in rollouts], "group_reward_error", "must be finite"),
    "misaligned": (
        lambda rollouts: [{"rank": 1.0} for _ in range(len(rollouts) + 1)],
        "group_reward_error",
        "reward dicts for",
    ),
    "misaligned_ids": (lambda rollouts: {"someone-else": {"rank": 1.0}}, "group_reward_error", "misaligned"),
    "rollout_failure": (_judge_down, "judge_error", "the judge answered off-schema"),
    "too_many_components": (
        lambda rollouts: [{f"g{i}": 0.0 for i in range(MAX_REWARD_COMPONENTS)} for _ in rollouts],
        "group_reward_error",
        f"more than the {MAX_REWARD_COMPONENTS} allowed",
    ),
}


class ScoringEnv(BaseEnv):
    """One ``step`` tool; the test sets what each hook does."""

    max_turns = 2

    def __init__(self, reward: Any, group: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reward = reward
        self.group = group
        self.reward_calls: list[tuple[str, str]] = []
        self.group_calls: list[list[str]] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "stepped"

    async def compute_reward(self, rollout):
        self.reward_calls.append((rollout.rollout_id, rollout.termination_reason))
        return self.reward(rollout)


class GroupScoringEnv(ScoringEnv):
    async def compute_group_rewards(self, rollouts):
        self.group_calls.append([rollout.rollout_id for rollout in rollouts])
        return self.group(rollouts)


async def run_group(make_engine, make_request, env, steps, ids=("a", "b")) -> dict[str, RolloutOutcome]:
    engine = make_engine(env, EngineConfig(retry=FAST_RETRY))
    result = await engine.run_group([make_request(steps, rollout_id=i) for i in ids])  # one example: same payload
    return result.by_id()


def assert_failed(outcome: RolloutOutcome, reason: str, relabel: str, text: str) -> None:
    assert outcome.termination_reason == settle_termination_reason(reason, relabel)
    assert outcome.rewards == {}
    assert outcome.scoring_error is not None and text in outcome.scoring_error
    assert outcome.error is not None and outcome.scoring_error in outcome.error
    assert not outcome.scored
    assert not is_scored(outcome.termination_reason, outcome.rewards, outcome.scoring_error)


@pytest.mark.parametrize("failure", sorted(INDIVIDUAL_FAILURES))
@pytest.mark.parametrize("reason", sorted(ENDINGS))
async def test_a_failed_compute_reward_leaves_the_rollout_unscored(make_engine, make_request, reason, failure):
    steps, budget = ENDINGS[reason]
    hook, relabel, text = INDIVIDUAL_FAILURES[failure]
    env = ScoringEnv(hook, max_tool_calls=budget)
    outcomes = await run_group(make_engine, make_request, env, steps)
    assert sorted(env.reward_calls) == [("a", reason), ("b", reason)]
    for outcome in outcomes.values():
        assert_failed(outcome, reason, relabel, text)


@pytest.mark.parametrize("failure", sorted(GROUP_FAILURES))
@pytest.mark.parametrize("reason", sorted(ENDINGS))
async def test_a_failed_compute_group_rewards_leaves_the_group_unscored(make_engine, make_request, reason, failure):
    steps, budget = ENDINGS[reason]
    hook, relabel, text = GROUP_FAILURES[failure]
    env = GroupScoringEnv(lambda rollout: {"own": 1.0}, hook, max_tool_calls=budget)
    outcomes = await run_group(make_engine, make_request, env, steps)
    assert env.group_calls == [["a", "b"]]
    for outcome in outcomes.values():
        assert_failed(outcome, reason, relabel, text)


@pytest.mark.parametrize("failure", sorted(INDIVIDUAL_FAILURES))
@pytest.mark.parametrize("reason", sorted(ENDINGS))
async def test_no_group_component_is_stored_beside_a_failed_compute_reward(make_engine, make_request, reason, failure):
    """The sibling whose own scoring failed is a failure: the group hook scores the others only."""
    steps, budget = ENDINGS[reason]
    hook, relabel, text = INDIVIDUAL_FAILURES[failure]

    def reward(rollout):
        return hook(rollout) if rollout.rollout_id == "a" else {"own": 1.0}

    env = GroupScoringEnv(reward, lambda rollouts: [{"rank": 1.0} for _ in rollouts], max_tool_calls=budget)
    outcomes = await run_group(make_engine, make_request, env, steps)
    assert env.group_calls == [["b"]]
    assert_failed(outcomes["a"], reason, relabel, text)
    assert outcomes["b"].termination_reason == reason
    assert outcomes["b"].rewards == {"own": 1.0, "rank": 1.0}
    assert outcomes["b"].scored and outcomes["b"].scoring_error is None


@pytest.mark.parametrize("reason", sorted(ENDINGS))
async def test_scoring_that_succeeds_keeps_every_reason_scored(make_engine, make_request, reason):
    steps, budget = ENDINGS[reason]
    env = GroupScoringEnv(lambda rollout: {"own": 0.5}, lambda rollouts: [{"rank": 1.0} for _ in rollouts])
    env.max_tool_calls = budget
    outcomes = await run_group(make_engine, make_request, env, steps)
    for outcome in outcomes.values():
        assert (outcome.termination_reason, outcome.rewards) == (reason, {"own": 0.5, "rank": 1.0})
        assert outcome.scored and outcome.scoring_error is None and outcome.error in (None, outcome.error)


@pytest.mark.parametrize(
    ("steps", "reason"),
    [([{"status": 400, "message": "bad role"}], "model_error"), ([STEP, STEP], "max_turns_exceeded")],
)
async def test_an_operational_failure_is_not_a_scoring_failure(make_engine, make_request, steps, reason):
    env = ScoringEnv(lambda rollout: {"own": 1.0}, max_tool_calls=None)
    outcomes = await run_group(make_engine, make_request, env, steps, ids=("a",))
    assert outcomes["a"].termination_reason == reason
    assert outcomes["a"].scoring_error is None
    assert outcomes["a"].scored == (reason == "max_turns_exceeded")


def test_a_scoring_error_with_rewards_is_refused():
    with pytest.raises(ValueError, match="carries no reward components"):
        RolloutOutcome({"own": 1.0}, TerminationReason.MAX_TURNS_EXCEEDED, scoring_error="compute_reward raised")


def test_reward_maps_past_the_caps_are_refused_at_construction():
    with pytest.raises(ValueError, match="components"):
        RolloutOutcome({f"c{i}": 0.0 for i in range(MAX_REWARD_COMPONENTS + 1)}, "finished")
    with pytest.raises(ValueError, match="characters"):
        RolloutOutcome({"k" * (MAX_REWARD_NAME_CHARS + 1): 0.0}, "finished")


class OwnHarness(Environment):
    """Its own harness: ``run_rollout`` ends every rollout with ``reason`` and ``rewards``."""

    def __init__(self, reason: str, rewards: dict[str, float] | None, outcome: bool = False) -> None:
        self.reason, self.rewards, self.outcome = reason, rewards, outcome

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def run_rollout(self, request):
        if self.outcome:
            return RolloutOutcome(dict(self.rewards or {}), self.reason, "it broke", rollout_id=request.rollout_id)
        return RolloutAttempt(
            rollout_id=request.rollout_id, termination_reason=self.reason, rewards=self.rewards, error="it broke"
        )


@pytest.mark.parametrize("outcome", [False, True], ids=["attempt", "outcome"])
@pytest.mark.parametrize("reason", ["tool_error", "sandbox_error", "model_error"])
async def test_a_failed_rollout_that_brings_non_zero_rewards_fails_loudly(make_engine, make_request, reason, outcome):
    """0.2.5 raises ValueError from run_group; here it is that rollout's harness_error, with the
    traceback logged and the message naming the rewards (an env bug is loud, the run goes on)."""
    env = OwnHarness(reason, {"correct": 1.0, "zero": 0.0}, outcome)
    outcomes = await run_group(make_engine, make_request, env, None, ids=("a",))
    failed = outcomes["a"]
    assert (failed.termination_reason, failed.rewards, failed.scored) == ("harness_error", {}, False)
    assert "run_rollout returned non-zero rewards ['correct'] for rollout 'a'" in (failed.error or "")
    assert f"which ended {reason!r}" in (failed.error or "")
    assert any("ValueError" in (entry.traceback or "") for entry in failed.logs)


@pytest.mark.parametrize("rewards", [None, {}, {"correct": 0.0}])
async def test_a_failed_rollout_with_zero_or_no_rewards_keeps_its_reason(make_engine, make_request, rewards):
    outcomes = await run_group(make_engine, make_request, OwnHarness("tool_error", rewards), None, ids=("a",))
    kept = outcomes["a"]
    assert (kept.termination_reason, kept.rewards, kept.error) == ("tool_error", {}, "it broke")


async def test_an_outcome_that_says_its_scoring_failed_stays_unscored(make_engine, make_request):
    class Relayed(OwnHarness):
        async def run_rollout(self, request):
            return RolloutOutcome(
                {}, "max_turns_exceeded", "nan reward", rollout_id=request.rollout_id, scoring_error="nan reward"
            )

    outcomes = await run_group(make_engine, make_request, Relayed("finished", None), None, ids=("a",))
    assert (outcomes["a"].termination_reason, outcomes["a"].scoring_error, outcomes["a"].scored) == (
        "max_turns_exceeded",
        "nan reward",
        False,
    )


class OverridingEnv(ScoringEnv):
    """``run_rollout`` overridden around the standard loop (``super().run_rollout``)."""

    async def run_rollout(self, request):
        return await super().run_rollout(request)


@pytest.mark.parametrize("env_class", [ScoringEnv, OverridingEnv])
async def test_an_unbound_injected_model_auth_is_a_model_error(make_engine, make_request, env_class):
    """As in 0.2.5: the auth headers are part of the model request, so a provider that cannot
    give them fails the rollout as model_error (not context_error, nor harness_error)."""
    env = env_class(lambda rollout: {"own": 1.0})
    engine = make_engine(env, EngineConfig(retry=FAST_RETRY))
    outcome = (await engine.run_group([make_request(model_auth=InjectedAuth("policy"))])).outcomes[0]
    assert outcome.termination_reason == "model_error"
    assert "No runtime model-auth provider was injected for 'policy'" in (outcome.error or "")
    assert (outcome.rewards, outcome.scored, env.reward_calls) == ({}, False, [])
    with bind_model_auth({"policy": StaticBearerAuth("sk-bound")}):
        bound = (await engine.run_group([make_request(model_auth=InjectedAuth("policy"))])).outcomes[0]
    assert (bound.termination_reason, bound.rewards) == ("finished", {"own": 1.0})
