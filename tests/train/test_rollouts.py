"""The rollout_func bridge: zero-fill, failures, the run store."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import torch
from calculator_env import CalculatorEnv

from benchmax.engine import Engine
from benchmax.envs import SamplingParams
from benchmax.runner import RunSession
from benchmax.store import DB_NAME
from benchmax.train import POLICY_URL
from benchmax.train._policy import InProcessPolicy
from benchmax.train._rewards import component_reward, zero_fill
from benchmax.train._rollouts import RolloutBridge


def test_zero_fill_supplies_components_another_rollout_of_the_batch_emitted():
    filled = zero_fill([{"a": 1.0, "b": 0.5}, {"a": 0.25}, {}])
    assert filled.components == ("a", "b")
    assert filled.rewards == ({"a": 1.0, "b": 0.5}, {"a": 0.25, "b": 0.0}, {"a": 0.0, "b": 0.0})
    assert filled.filled == ((), ("b",), ("a", "b"))


def test_component_rewards_drop_unscorable_rollouts_only_when_asked():
    kwargs = {"benchmax_rewards": [{"a": 1.0}, {"a": 0.0}], "benchmax_scorable": [True, False]}
    assert component_reward("a")(**kwargs) == [1.0, 0.0]
    assert component_reward("a", drop_unscorable=True)(**kwargs) == [1.0, None]
    assert component_reward("never")(**kwargs) == [None, None]
    assert component_reward("a").__name__ == "a"


def test_a_failing_rollout_is_masked_and_stored_without_stopping_the_batch(tiny, tool_bias, tmp_path):
    model, tokenizer = tiny
    torch.manual_seed(4)
    policy = InProcessPolicy(model, tokenizer, generate_kwargs={"sequence_bias": tool_bias})
    env = CalculatorEnv(broken=True)
    engine = Engine(env)
    engine.clients.register(POLICY_URL, policy)
    dataset = asyncio.run(env.create_dataset("train", Path(".")))
    session = RunSession.create(tmp_path / "run", kind="train", meta={})
    session.add_examples("train", dataset)
    bridge = RolloutBridge(
        engine=engine,
        examples={example.id: example for example in dataset},
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=1.0, max_tokens=8),
        policy=policy,
        session=session,
    )
    prompts = [example.id for example in dataset for _ in range(2)]
    try:
        first = bridge.generate(prompts, group_size=2, step=7)
        bridge.generate(prompts, group_size=2, step=8)
    finally:
        bridge.loop.run(engine.aclose())
        bridge.loop.close()
        policy.close()
        session.close()
    assert len(first["completion_ids"]) == len(prompts)
    broken = [index for index, reason in enumerate(first["termination_reason"]) if reason == "context_error"]
    assert broken == [2, 3]
    for index in broken:
        assert first["benchmax_scorable"][index] is False
        assert set(first["env_mask"][index]) == {0}
        assert first["benchmax_rewards"][index]["short"] == 0.0
        assert "short" in first["benchmax_filled"][index]
    assert all(first["benchmax_scorable"][index] for index in (0, 1, 4, 5, 6, 7))
    assert first["rollout_id"][:2] == [f"step7/train/{dataset[0].id}#0", f"step7/train/{dataset[0].id}#1"]
    assert policy.state(first["rollout_id"][0]) is None
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        rows = conn.execute("SELECT step, batch, COUNT(*) FROM rollouts GROUP BY step, batch ORDER BY step").fetchall()
        failures = conn.execute("SELECT COUNT(*) FROM rollouts WHERE termination_reason = 'context_error'").fetchone()
        fills = conn.execute("SELECT COUNT(*) FROM rewards WHERE filled = 1 AND component = 'short'").fetchone()
    assert rows == [(7, 0, 8), (8, 1, 8)]
    assert failures == (4,)
    assert fills == (4,)
