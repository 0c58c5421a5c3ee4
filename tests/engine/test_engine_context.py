"""``rollout_context``: entered before the prompt, exited after scoring, always exited."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, ListDataset, RolloutFailure


class ContextEnv(BaseEnv):
    """Records the order of context, model, tool and reward events per rollout."""

    max_turns = 3

    def __init__(self, server, *, reward_raises=False, setup_raises=None, exit_raises=False):
        super().__init__()
        self.server = server
        self.events: list[tuple[str, str]] = []
        self.active: set[str] = set()
        self.reward_raises = reward_raises
        self.setup_raises = setup_raises
        self.exit_raises = exit_raises
        self.requests_seen_at_enter: list[int] = []

    @property
    def enters(self) -> int:
        return sum(1 for event, _ in self.events if event == "enter")

    @property
    def exits(self) -> int:
        return sum(1 for event, _ in self.events if event == "exit")

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "wait", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        assert rollout_id in self.active
        self.events.append(("tool", rollout_id))
        await asyncio.sleep(args.get("seconds", 0))
        return "waited"

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self.requests_seen_at_enter.append(len(self.server.requests))
        self.events.append(("enter", rollout_id))
        if self.setup_raises is not None:
            raise self.setup_raises
        self.active.add(rollout_id)
        try:
            yield
        finally:
            self.active.discard(rollout_id)
            await asyncio.sleep(0)
            self.events.append(("exit", rollout_id))
            if self.exit_raises:
                raise OSError("could not remove the workspace")

    async def compute_reward(self, rollout):
        self.events.append(("reward", rollout.rollout_id))
        assert rollout.rollout_id in self.active, "compute_reward ran outside the context"
        if self.reward_raises:
            raise RuntimeError("reward bug")
        return {"inside": 1.0}


WAIT = {"tool_calls": [{"name": "wait"}]}
FAST = EngineConfig(retry=RetryPolicy(max_attempts=2, backoff_initial=0.01))


async def test_context_wraps_model_tools_and_reward_in_that_order(make_engine, make_request, scripted_server):
    env = ContextEnv(scripted_server)
    result = await make_engine(env).run_group([make_request([WAIT, {"content": "ok"}])])
    assert result.outcomes[0].rewards == {"inside": 1.0}
    assert [event for event, _ in env.events] == ["enter", "tool", "reward", "exit"]
    assert env.requests_seen_at_enter == [0]


@pytest.mark.parametrize(
    ("steps", "kwargs", "config", "reason"),
    [
        ([{"content": "ok"}], {}, FAST, "finished"),
        ([WAIT, WAIT, WAIT, WAIT], {}, FAST, "max_turns_exceeded"),
        ([{"content": "ok"}], {"reward_raises": True}, FAST, "reward_error"),
        ([{"status": 500}], {}, FAST, "model_error"),
        ([{"error": "context"}], {}, FAST, "context_exceeded"),
        (
            [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 5}}]}],
            {},
            EngineConfig(tool_timeout=0.1),
            "timeout",
        ),
        (
            [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 5}}]}],
            {},
            EngineConfig(rollout_timeout=0.2, tool_timeout=None),
            "timeout",
        ),
        ([{"sleep": 2, "content": "x"}], {}, EngineConfig(rollout_timeout=0.2), "timeout"),
    ],
    ids=[
        "finished",
        "max-turns",
        "reward-error",
        "model-error",
        "context-exceeded",
        "tool-timeout",
        "rollout-timeout-in-tool",
        "rollout-timeout-in-model",
    ],
)
async def test_the_context_is_exited_exactly_once_however_the_rollout_ends(
    make_engine, make_request, scripted_server, steps, kwargs, config, reason
):
    env = ContextEnv(scripted_server, **kwargs)
    result = await make_engine(env, config).run_group([make_request(steps)])
    assert result.outcomes[0].termination_reason == reason
    assert (env.enters, env.exits) == (1, 1)
    assert env.active == set()


async def test_cancelling_a_group_exits_every_context_and_propagates(make_engine, make_request, scripted_server):
    env = ContextEnv(scripted_server)
    engine = make_engine(env)
    slow = [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 30}}]}]
    hung = [{"sleep": 30, "content": "never"}]
    tasks = [
        asyncio.create_task(engine.run_group([make_request(slow, rollout_id="in-tool")])),
        asyncio.create_task(engine.run_group([make_request(hung, rollout_id="in-model")])),
    ]
    for _ in range(500):
        if ("tool", "in-tool") in env.events and len(scripted_server.requests) == 2:
            break
        await asyncio.sleep(0.01)
    assert env.enters == 2 and env.exits == 0
    for task in tasks:
        task.cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes)
    assert env.exits == 2
    assert env.active == set()


async def test_cancelling_one_sibling_group_exits_all_its_contexts(make_engine, make_request, scripted_server):
    env = ContextEnv(scripted_server)
    engine = make_engine(env)
    example = make_request([{"sleep": 30, "content": "x"}]).example
    requests = [make_request(example=example, rollout_id=f"s{i}") for i in range(4)]
    task = asyncio.create_task(engine.run_group(requests))
    while env.enters < 4:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (env.enters, env.exits) == (4, 4)


async def test_cancelling_during_compute_reward_still_exits_the_context(make_engine, make_request, scripted_server):
    started = asyncio.Event()

    class SlowReward(ContextEnv):
        async def compute_reward(self, rollout):
            started.set()
            await asyncio.sleep(30)
            return {}

    env = SlowReward(scripted_server)
    task = asyncio.create_task(make_engine(env).run_group([make_request([{"content": "x"}])]))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (env.enters, env.exits) == (1, 1)


async def test_a_rollout_failure_in_setup_ends_with_its_reason_before_any_model_call(
    make_engine, make_request, scripted_server
):
    env = ContextEnv(scripted_server, setup_raises=RolloutFailure("sandbox_error", "no docker"))
    result = await make_engine(env).run_group([make_request([{"content": "x"}])])
    outcome = result.outcomes[0]
    assert (outcome.termination_reason, outcome.error, outcome.rewards) == (
        "sandbox_error",
        "no docker",
        {},
    )
    assert scripted_server.requests == []


async def test_a_crash_in_setup_is_a_context_error_with_its_traceback_logged(
    make_engine, make_request, scripted_server
):
    env = ContextEnv(scripted_server, setup_raises=FileNotFoundError("fixtures/db.sqlite"))
    result = await make_engine(env).run_group([make_request([{"content": "x"}])])
    outcome = result.outcomes[0]
    assert outcome.termination_reason == "context_error"
    assert outcome.error == "FileNotFoundError: fixtures/db.sqlite"
    (entry,) = outcome.logs
    assert entry.level == "ERROR" and "FileNotFoundError" in entry.traceback
    assert scripted_server.requests == []


async def test_a_crash_while_exiting_the_context_is_a_context_error_without_rewards(
    make_engine, make_request, scripted_server
):
    env = ContextEnv(scripted_server, exit_raises=True)
    result = await make_engine(env).run_group([make_request([{"content": "x"}])])
    outcome = result.outcomes[0]
    assert outcome.termination_reason == "context_error"
    assert outcome.rewards == {}
    assert "could not remove the workspace" in outcome.error
