"""The endpoint's health gate: requests wait while the endpoint is down, and resume when it is back."""

from __future__ import annotations

import asyncio

import pytest

from benchmax.client import EndpointDown, EndpointGate, HttpModelClient, RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, Example, ListDataset, RolloutRequest, canonical_example_id
from benchmax.testing import ScriptedServer, ServerProcess

FAST = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


class TwoTurnEnv(BaseEnv):
    """Each rollout calls one tool, then answers: a lost answer mid-transcript must be re-sent."""

    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        return "pong"

    async def compute_reward(self, rollout):
        tools = sum(message["role"] == "tool" for message in rollout.messages)
        assistants = sum(message["role"] == "assistant" for message in rollout.messages)
        return {"one_tool_two_turns": float(tools == 1 and assistants == 2)}


def _request(index: int, base_url: str) -> RolloutRequest:
    script = '[{"sleep": 0.3, "tool_calls": [{"name": "ping", "arguments": {}}]}, {"sleep": 0.3, "content": "done"}]'
    payload = {"prompt_messages": [{"role": "user", "content": f"q{index}\n#script: {script}"}]}
    return RolloutRequest(f"r{index}", Example(canonical_example_id(payload), payload), "scripted", base_url)


async def test_a_server_killed_mid_run_and_restarted_on_its_port_loses_no_rollout():
    server = ServerProcess().start()
    engine = Engine(TwoTurnEnv(), EngineConfig(retry=FAST, max_outage=60))
    client = engine.clients.http(server.base_url)
    try:
        groups = asyncio.gather(*(engine.run_group([_request(i, server.base_url)]) for i in range(16)))
        await asyncio.sleep(0.45)  # every rollout has a request in flight: their answers are lost
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.start)
        results = await asyncio.wait_for(groups, 60)
    finally:
        await engine.aclose()
        server.kill()
    outcomes = [result.outcomes[0] for result in results]
    assert [outcome.termination_reason for outcome in outcomes] == ["finished"] * 16
    assert all(outcome.rewards == {"one_tool_two_turns": 1.0} for outcome in outcomes), "transcripts stay whole"
    (outage,) = client.gate.outages
    assert outage.ended_at is not None and outage.held >= 16 and not outage.failed
    assert outage.seconds >= 0.9
    assert not client.stats.retries, "no retry was spent while the endpoint was down"
    assert client.stats.resent >= 16, "every lost answer was asked for again"


async def test_one_requests_500_and_a_429_with_retry_after_take_the_retry_path_without_tripping():
    steps = [{"fail": {"status": 500, "times": 1}, "content": "ok"}]
    with ScriptedServer() as server:
        client = HttpModelClient(server.base_url, retry=FAST)
        try:
            for fault in ({"status": 500, "times": 1}, {"status": 429, "times": 1, "retry_after": 0}):
                body = {
                    "model": "m",
                    "messages": [
                        {
                            "role": "user",
                            "content": f'#script: [{{"fail": {fault}, "content": "ok"}}]'.replace("'", '"'),
                        }
                    ],
                }
                assert (await client.chat(body)).message["content"] == "ok"
        finally:
            await client.aclose()
    assert steps
    assert client.gate.outages == [] and not client.gate.down
    assert client.stats.retries == {"http_500": 1, "http_429": 1}


async def test_past_the_outage_budget_the_held_requests_fail_and_new_ones_fail_at_once():
    gate = EndpointGate("http://nowhere/v1", probe=None, max_outage=0.2)
    gate.hold("the process died")
    with pytest.raises(EndpointDown, match=r"down for \d+ s \(the process died\); past the outage budget of 0.2 s"):
        await asyncio.wait_for(gate.admit(), 5)
    with pytest.raises(EndpointDown):
        await gate.admit()
    gate.release()
    await asyncio.wait_for(gate.admit(), 1)
    (outage,) = gate.outages
    assert outage.failed and outage.held == 1
    await gate.aclose()


async def test_the_rollout_timeout_leaves_out_the_time_spent_waiting_for_the_endpoint():
    with ScriptedServer() as server:
        engine = Engine(TwoTurnEnv(), EngineConfig(retry=FAST, rollout_timeout=1.0))
        gate = engine.clients.gate(server.base_url)
        gate.hold("restarting")
        try:
            task = asyncio.ensure_future(engine.run_group([_request(0, server.base_url)]))
            await asyncio.sleep(1.5)  # held longer than the rollout may take
            gate.release()
            result = await asyncio.wait_for(task, 10)
        finally:
            await engine.aclose()
    assert result.outcomes[0].termination_reason == "finished", result.outcomes[0].error
