"""The rollout_func bridge: zero-fill, failures, the run store."""

from __future__ import annotations

import asyncio
import copy
import math
import sqlite3
from collections import Counter
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from calculator_env import CalculatorEnv
from signal_env import SignalEnv

from benchmax.engine import Engine
from benchmax.envs import SamplingParams
from benchmax.runner import RunSession
from benchmax.store import DB_NAME, Run
from benchmax.train import POLICY_URL
from benchmax.train._policy import InProcessPolicy
from benchmax.train._rewards import component_reward, zero_fill
from benchmax.train._rollouts import RolloutBridge
from benchmax.train._sequences import TokenMismatch, assemble


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


def _signal_bridge(tiny, tmp_path, *, policy_model=None, **options):
    model, tokenizer = tiny
    policy = InProcessPolicy(policy_model or model, tokenizer)
    env = SignalEnv(**options.pop("env", {}))
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
        sampling=SamplingParams(temperature=1.0, max_tokens=4),
        policy=policy,
        session=session,
        known_components=frozenset({"score"}),
        example_index={example.id: index for index, example in enumerate(dataset)},
        **options,
    )
    flat = {example.id for example in dataset if example.payload["flat"]}
    return bridge, policy, session, flat


def _close(bridge, policy, session):
    bridge.loop.run(bridge.aclose_pipeline())
    bridge.loop.run(bridge.engine.aclose())
    bridge.loop.close()
    policy.close()
    session.close()


def test_dead_groups_are_not_trained_on_and_the_step_is_refilled_with_everything_stored(tiny, tmp_path):
    torch.manual_seed(0)
    bridge, policy, session, flat = _signal_bridge(tiny, tmp_path, async_steps=0, max_refill=4)
    try:
        batches = [bridge.step_batch(step, groups=2, group_size=2) for step in range(3)]
    finally:
        _close(bridge, policy, session)
    drawn_dead = 0
    for batch in batches:
        trained = {outcome.example_id for outcome in batch.outcomes}
        assert len(batch.outcomes) == 4 and not trained & flat
        assert not any(batch.masked)
        dead = [o for o in batch.drawn if o.example_id in flat]
        assert batch.metrics["groups/dead"] == len(dead) / 2
        assert batch.metrics["groups/drawn"] == len(batch.drawn) / 2
        assert batch.metrics["groups/dead_share"] == len(dead) / len(batch.drawn)
        assert batch.metrics["generated/score"] == sum(o.rewards["score"] for o in batch.drawn) / len(batch.drawn)
        drawn_dead += len(dead)
    assert drawn_dead > 0, "half the examples are flat: some dead group must have been drawn and dropped"
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        stored = conn.execute("SELECT step, COUNT(*) FROM rollouts GROUP BY step ORDER BY step").fetchall()
    assert stored == [(batch.step, len(batch.drawn)) for batch in batches]


def test_a_training_call_groups_by_the_runs_group_size_never_by_what_the_trainer_reports(tiny, tmp_path):
    """The bridge's group size is the run's; TRL's ``num_generations`` is set from it and never read back."""
    torch.manual_seed(0)
    bridge, policy, session, _ = _signal_bridge(tiny, tmp_path, async_steps=0, dead_groups="keep", group_size=2)
    first, second = list(bridge.examples)[:2]
    trainer = SimpleNamespace(
        model=SimpleNamespace(training=True),
        state=SimpleNamespace(global_step=0),
        args=SimpleNamespace(max_steps=1),
        num_generations=4,
    )
    try:
        output = bridge([first, first, second, second], trainer)
    finally:
        _close(bridge, policy, session)
    assert len(output["rollout_id"]) == 4
    per_group = Counter(rollout_id.rsplit("#", 1)[0] for rollout_id in output["rollout_id"])
    assert sorted(per_group.values()) == [2, 2]


def test_when_the_refill_bound_is_reached_dead_groups_fill_the_step_masked_out_of_the_loss(tiny, tmp_path):
    torch.manual_seed(0)
    bridge, policy, session, _ = _signal_bridge(
        tiny, tmp_path, async_steps=0, max_refill=1, env={"flat": (0, 1, 2, 3)}
    )
    try:
        batch = bridge.step_batch(0, groups=2, group_size=2)
        output = bridge._output(batch)
    finally:
        _close(bridge, policy, session)
    assert batch.metrics["groups/drawn"] == 3 and batch.metrics["groups/dead_trained"] == 2
    assert all(batch.masked)
    assert all(set(mask) == {0} for mask in output["env_mask"])


def test_keep_trains_on_the_groups_drawn_dead_or_not(tiny, tmp_path):
    torch.manual_seed(0)
    bridge, policy, session, flat = _signal_bridge(tiny, tmp_path, async_steps=0, dead_groups="keep")
    try:
        batches = [bridge.step_batch(step, groups=2, group_size=2) for step in range(2)]
    finally:
        _close(bridge, policy, session)
    for batch in batches:
        assert batch.metrics["groups/drawn"] == 2
        assert batch.drawn == batch.outcomes
    assert {o.example_id for batch in batches for o in batch.outcomes} & flat


def test_async_generation_runs_ahead_by_at_most_k_steps_and_records_each_turns_policy_version(tiny, tmp_path):
    torch.manual_seed(0)
    model, _ = tiny
    trainer_model = copy.deepcopy(model)
    bridge, policy, session, _ = _signal_bridge(
        tiny, tmp_path, policy_model=copy.deepcopy(model), async_steps=1, dead_groups="keep"
    )
    batches = []
    try:
        for step in range(4):
            policy.stage_weights(trainer_model, step)  # what the trainer does before each step
            batches.append(bridge.step_batch(step, groups=2, group_size=2, last_step=3))
            pipeline = bridge._pipeline
            if step < 3:
                # the next step is generated without being asked for
                ready = bridge.loop.run(_wait_until(partial(pipeline.generated, step + 1)))
                assert ready, f"step {step + 1} was not generated ahead"
            assert all(key <= step + 1 for key in pipeline._ready), "generated more than one step ahead"
    finally:
        _close(bridge, policy, session)
    for batch in batches:
        versions = [turn.policy_version for outcome in batch.outcomes for turn in outcome.turns]
        assert versions and all(version is not None for version in versions)
        assert all(batch.step - 1 <= version <= batch.step for version in versions)
        assert batch.metrics["policy/staleness_max"] <= 1
    assert any(batch.metrics["policy/staleness_max"] == 1 for batch in batches[1:])
    with Run(tmp_path / "run") as run:
        stored = [rollout.turns for rollout in run.rollouts()]
    assert stored and all(turn.policy_version is not None for turns in stored for turn in turns)


def test_synchronous_steps_generate_when_asked_from_the_current_version(tiny, tmp_path):
    torch.manual_seed(0)
    bridge, policy, session, _ = _signal_bridge(tiny, tmp_path, async_steps=0, dead_groups="keep")
    try:
        for step in range(2):
            policy.version = step
            batch = bridge.step_batch(step, groups=2, group_size=2)
            assert {turn.policy_version for o in batch.outcomes for turn in o.turns} == {step}
            assert batch.metrics["policy/staleness_max"] == 0
            assert 2 not in bridge._pipeline._ready
    finally:
        _close(bridge, policy, session)


async def _wait_until(predicate, timeout=60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return False


def test_the_token_check_flags_a_turn_whose_prompt_does_not_extend_what_was_sampled():
    from benchmax.envs import RolloutOutcome, TurnRecord

    turns = (
        TurnRecord(0, 0.0, 0.0, prompt_token_ids=(1, 2), completion_token_ids=(3,), completion_logprobs=(-0.5,)),
        TurnRecord(1, 0.0, 0.0, prompt_token_ids=(1, 2, 4, 5), completion_token_ids=(6,)),
    )
    outcome = RolloutOutcome(rewards={"a": 1.0}, termination_reason="finished", rollout_id="r", turns=turns)
    with pytest.raises(TokenMismatch, match="turn 1's prompt does not extend"):
        assemble(outcome)
    good = (turns[0], TurnRecord(1, 0.0, 0.0, prompt_token_ids=(1, 2, 3, 9), completion_token_ids=(6,)))
    sequence = assemble(RolloutOutcome(rewards={}, termination_reason="finished", rollout_id="r", turns=good))
    assert sequence.completion_ids == (3, 9, 6)
    assert sequence.env_mask == (1, 0, 1)
    assert sequence.logprobs[:2] == (-0.5, 0.0) and math.isnan(sequence.logprobs[2])
