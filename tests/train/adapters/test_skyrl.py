"""The SkyRL adapter: skyrl-gym's own registry builds the env; SkyRL's generator is played
by the test (``init``, then ``step`` with response text, as ``SkyRLGymGenerator.agent_loop``
does), and benchmax's engine runs the env behind it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import skyrl_gym
from adapter_env import LookupEnv, RankedLookupEnv, example
from skyrl_gym.envs.base_text_env import BaseTextEnv

from benchmax.envs import RolloutOutcome
from benchmax.train.adapters.skyrl import SkyRLBridge, to_skyrl_row

LOOKUP = '<tool_call>{"name": "lookup", "arguments": {"key": "France"}}</tool_call>'


@pytest.fixture
def lookup_env() -> LookupEnv:
    return LookupEnv()


@pytest.fixture
def bridge(lookup_env: LookupEnv) -> Iterator[tuple[SkyRLBridge, str, list[RolloutOutcome]]]:
    outcomes: list[RolloutOutcome] = []
    bridge = SkyRLBridge(lookup_env, weights={"correct": 2.0, "used_tool": 0.5}, on_outcome=outcomes.append)
    env_id = f"benchmax-{uuid.uuid4().hex[:8]}"
    bridge.register(env_id)
    yield bridge, env_id, outcomes
    skyrl_gym.envs.registration.deregister(env_id)
    bridge.close()


def make(env_id: str, **extra: object) -> tuple[BaseTextEnv, list[dict]]:
    row = to_skyrl_row(example(**extra), env_class=env_id)
    extras = {key: value for key, value in row.items() if key not in ("prompt", "env_class")}
    return skyrl_gym.make(row["env_class"], env_config={}, extras=extras), row["prompt"]


def test_a_tool_turn_returns_the_tool_result_as_the_observation_and_the_answer_ends_with_the_weighted_reward(
    bridge, lookup_env
):
    _, env_id, outcomes = bridge
    env, prompt = make(env_id)
    assert isinstance(env, BaseTextEnv)
    chat, _ = env.init(prompt)
    assert chat == prompt
    first = env.step(LOOKUP)
    assert first["done"] is False
    assert [(m["role"], m["content"]) for m in first["observations"]] == [("tool", "Paris")]
    final = env.step("It is Paris.")
    assert final["done"] is True
    assert final["reward"] == 2.0 * 1.0 + 0.5 * 1.0
    assert final["metadata"]["rewards"] == {"correct": 1.0, "used_tool": 1.0}
    assert final["metadata"]["termination_reason"] == "finished"
    (outcome,) = outcomes
    assert [m["role"] for m in outcome.messages] == ["user", "assistant", "tool", "assistant"]
    assert outcome.messages[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert [(log.phase, log.message) for log in outcome.logs if log.logger == "adapter_env"] == [
        ("tools", "looked up France")
    ]
    assert lookup_env.entered == lookup_env.exited == [outcome.rollout_id]
    assert env.get_metrics() == {"correct": 1.0, "used_tool": 1.0, "scored": 1.0}


def test_a_weighted_component_the_env_did_not_emit_counts_as_zero(bridge):
    _, env_id, _ = bridge
    env, prompt = make(env_id)
    env.init(prompt)
    final = env.step("Lyon")
    assert final["done"] is True
    assert final["metadata"]["rewards"] == {"correct": 0.0, "used_tool": 0.0}
    assert final["reward"] == 0.0


def test_the_envs_turn_budget_ends_the_trajectory_as_max_turns_exceeded(bridge, lookup_env):
    _, env_id, _ = bridge
    env, prompt = make(env_id)
    env.init(prompt)
    replies = [env.step(LOOKUP) for _ in range(lookup_env.max_turns)]
    assert [reply["done"] for reply in replies] == [False, False, True]
    assert replies[-1]["metadata"]["termination_reason"] == "max_turns_exceeded"
    assert replies[-1]["reward"] == 0.5


def test_a_failing_rollout_context_ends_the_first_step_unscored_without_raising(bridge):
    _, env_id, outcomes = bridge
    env, prompt = make(env_id, broken=True)
    chat, _ = env.init(prompt)
    assert chat == prompt
    final = env.step("Paris")
    assert final["done"] is True
    assert final["reward"] == 0.0
    assert final["metadata"]["termination_reason"] == "context_error"
    assert "sandbox would not start" in final["metadata"]["error"]
    assert outcomes[0].rewards == {}


def test_closing_a_trajectory_skyrl_stopped_early_exits_its_context(bridge, lookup_env):
    _, env_id, outcomes = bridge
    env, prompt = make(env_id)
    env.init(prompt)
    env.step(LOOKUP)
    env.close()
    assert outcomes[0].termination_reason == "cancelled"
    assert lookup_env.exited == lookup_env.entered == [outcomes[0].rollout_id]


def test_an_env_with_group_rewards_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="RankedLookupEnv implements compute_group_rewards"):
        SkyRLBridge(RankedLookupEnv())


def test_a_row_without_the_example_names_the_missing_field(bridge):
    _, env_id, _ = bridge
    with pytest.raises(ValueError, match="benchmax_example_id or benchmax_payload"):
        skyrl_gym.make(env_id, env_config={}, extras={"extra_info": {}})
