"""Several replicas behind one logical endpoint: load spread, sticky rollouts, a replica routed around."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from aiohttp import web
from tool_env import ToolThenAnswerEnv

from benchmax.client import ClientPool, EndpointDown, ReplicaRouter, RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import Example, RolloutRequest, canonical_example_id
from benchmax.testing import ScriptedServer, ServerProcess

FAST = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


def _request(index: int, base_url: str, sleep: float = 0.05) -> RolloutRequest:
    script = (
        f'[{{"sleep": {sleep}, "tool_calls": [{{"name": "ping", "arguments": {{}}}}]}}, '
        f'{{"sleep": {sleep}, "content": "done"}}]'
    )
    payload = {"prompt_messages": [{"role": "user", "content": f"q{index}\n#script: {script}"}]}
    return RolloutRequest(f"r{index}", Example(canonical_example_id(payload), payload), "scripted", base_url)


def _body(text: str, sleep: float = 0.0) -> dict:
    script = f'[{{"sleep": {sleep}, "content": "ok"}}]'
    return {"model": "m", "messages": [{"role": "user", "content": f"{text}\n#script: {script}"}]}


def _prompts(server: ScriptedServer) -> Counter[str]:
    return Counter(body["messages"][0]["content"].split("\n", 1)[0] for body in server.requests)


async def test_requests_spread_by_least_outstanding_and_each_replica_counts_its_own():
    with ScriptedServer() as first, ScriptedServer() as second:
        pool = ClientPool(retry=FAST)
        key = pool.route([first.base_url, second.base_url])
        try:
            router = pool.get(key)
            assert isinstance(router, ReplicaRouter) and key == first.base_url
            results = await asyncio.gather(*(router.chat(_body(f"q{i}", 0.1)) for i in range(40)))
        finally:
            await pool.aclose()
        served = (first.counts["requests"], second.counts["requests"])
    assert [result.message["content"] for result in results] == ["ok"] * 40
    assert sum(served) == 40 and min(served) >= 15, served
    per_replica = pool.stats()["endpoints"]
    assert (per_replica[first.base_url]["requests"], per_replica[second.base_url]["requests"]) == served


async def test_a_multi_turn_rollout_stays_on_the_replica_that_served_its_first_turn():
    with ScriptedServer() as first, ScriptedServer() as second:
        pool = ClientPool(retry=FAST)
        key = pool.route([first.base_url, second.base_url])
        engine = Engine(ToolThenAnswerEnv(), EngineConfig(retry=FAST), clients=pool)
        try:
            results = await asyncio.gather(*(engine.run_group([_request(i, key)]) for i in range(16)))
        finally:
            await engine.aclose()
        on_first, on_second = _prompts(first), _prompts(second)
    assert all(result.outcomes[0].rewards == {"one_tool_two_turns": 1.0} for result in results)
    assert not set(on_first) & set(on_second), "no rollout moved between replicas"
    assert set(on_first.values()) == set(on_second.values()) == {2}, "both turns of each rollout on one replica"
    assert len(on_first) + len(on_second) == 16 and on_first and on_second


async def test_a_replica_killed_mid_run_is_routed_around_and_every_rollout_finishes_on_the_other():
    dying = ServerProcess().start()
    with ScriptedServer() as staying:
        pool = ClientPool(retry=FAST, max_outage=60)
        key = pool.route([dying.base_url, staying.base_url])
        engine = Engine(ToolThenAnswerEnv(), EngineConfig(retry=FAST), clients=pool)
        try:
            groups = asyncio.gather(*(engine.run_group([_request(i, key, sleep=0.3)]) for i in range(16)))
            await asyncio.sleep(0.45)  # every rollout waits on its second turn: half on the dying replica
            await asyncio.to_thread(dying.kill)
            results = await asyncio.wait_for(groups, 60)
        finally:
            await engine.aclose()
            dying.kill()
        served_second_turns = sum(1 for body in staying.requests if len(body["messages"]) > 1)
    outcomes = [result.outcomes[0] for result in results]
    assert [outcome.termination_reason for outcome in outcomes] == ["finished"] * 16
    assert all(outcome.rewards == {"one_tool_two_turns": 1.0} for outcome in outcomes), "transcripts stay whole"
    router = pool.get(key)
    assert isinstance(router, ReplicaRouter) and router.rerouted >= 1
    (outage,) = pool.gate(dying.base_url).all_outages()
    assert outage.rerouted == router.rerouted and outage.held == 0, "nothing waited: the other replica served"
    assert served_second_turns == 16, "the rollouts of the dead replica finished on the other"
    stats = pool.stats()
    assert not stats["retries"] and not stats["failures"], stats


async def test_with_every_replica_down_requests_wait_and_go_on_when_one_comes_back():
    replicas = [ServerProcess().start(), ServerProcess().start()]
    pool = ClientPool(retry=FAST, max_outage=60)
    key = pool.route([replica.base_url for replica in replicas])
    engine = Engine(ToolThenAnswerEnv(), EngineConfig(retry=FAST, rollout_timeout=2.0), clients=pool)
    try:
        groups = asyncio.gather(*(engine.run_group([_request(i, key, sleep=0.3)]) for i in range(8)))
        await asyncio.sleep(0.45)
        for replica in replicas:
            await asyncio.to_thread(replica.kill)
        router = pool.get(key)
        assert isinstance(router, ReplicaRouter)
        while router.waiting < 8:
            await asyncio.sleep(0.02)
        await asyncio.sleep(2.5)  # longer than the rollout may take: the wait does not count
        await asyncio.to_thread(replicas[1].start)
        results = await asyncio.wait_for(groups, 60)
    finally:
        await engine.aclose()
        for replica in replicas:
            replica.kill()
    outcomes = [result.outcomes[0] for result in results]
    assert [outcome.termination_reason for outcome in outcomes] == ["finished"] * 8, [o.error for o in outcomes]
    assert pool.gate(replicas[1].base_url).outages[0].held >= 8
    assert pool.gate(replicas[0].base_url).down, "the replica that stayed dead is still routed around"


async def test_every_replica_down_past_the_budget_fails_the_waiting_requests_with_endpoint_down():
    urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:7/v1"]  # nothing listens on discard or echo
    pool = ClientPool(retry=FAST, max_outage=0.5)
    key = pool.route(urls)
    try:
        with pytest.raises(EndpointDown, match=r"all 2 replicas of http://127.0.0.1:9/v1 down for .*past the outage"):
            await asyncio.wait_for(pool.get(key).chat(_body("q")), 20)
        assert pool.failed(key)
        with pytest.raises(EndpointDown):
            await pool.get(key).chat(_body("again"))
    finally:
        await pool.aclose()
    assert pool.stats()["failures"] == {"endpoint_down": 2}
    assert not pool.stats()["retries"]


class _CountingServer(ScriptedServer):
    """The scripted server, counting how many chat requests it holds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.peak = 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await super()._chat(request)
        finally:
            self.active -= 1


async def test_the_request_limit_applies_to_each_replica():
    with _CountingServer() as first, _CountingServer() as second:
        pool = ClientPool(retry=FAST, max_requests=2)
        key = pool.route([first.base_url, second.base_url])
        try:
            await asyncio.gather(*(pool.get(key).chat(_body(f"q{i}", 0.05)) for i in range(12)))
        finally:
            await pool.aclose()
    assert (first.peak, second.peak) == (2, 2)
    assert first.counts["requests"] + second.counts["requests"] == 12


def test_a_router_needs_distinct_replicas():
    pool = ClientPool()
    with pytest.raises(ValueError, match="listed twice"):
        pool.route(["http://a:1/v1", "http://a:1/v1/"])
    assert pool.route(["http://a:1/v1/"]) == "http://a:1/v1", "one replica is its own endpoint"
