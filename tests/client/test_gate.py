"""The endpoint's health gate: requests wait while the endpoint is down, and resume when it is back."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest
from tool_env import ToolThenAnswerEnv

from benchmax.client import ClientPool, EndpointDown, EndpointGate, HttpModelClient, RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import Example, RolloutRequest, canonical_example_id
from benchmax.testing import ScriptedServer, ServerProcess, free_port

FAST = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


def _request(index: int, base_url: str) -> RolloutRequest:
    script = '[{"sleep": 0.3, "tool_calls": [{"name": "ping", "arguments": {}}]}, {"sleep": 0.3, "content": "done"}]'
    payload = {"prompt_messages": [{"role": "user", "content": f"q{index}\n#script: {script}"}]}
    return RolloutRequest(f"r{index}", Example(canonical_example_id(payload), payload), "scripted", base_url)


async def test_a_server_killed_mid_run_and_restarted_on_its_port_loses_no_rollout():
    server = ServerProcess().start()
    engine = Engine(ToolThenAnswerEnv(), EngineConfig(retry=FAST, max_outage=60))
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
        engine = Engine(ToolThenAnswerEnv(), EngineConfig(retry=FAST, rollout_timeout=1.0))
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


def _body(text: str = "hi") -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


async def test_a_host_name_that_does_not_resolve_takes_the_endpoint_down_without_spending_retries():
    client = HttpModelClient("http://nothing-here.invalid:8000/v1", retry=FAST, max_outage=0.5)
    try:
        with pytest.raises(EndpointDown, match=r"nothing-here.invalid.*past the outage budget of 0.5 s"):
            await asyncio.wait_for(client.chat(_body()), 20)
    finally:
        await client.aclose()
    (outage,) = client.gate.all_outages()
    assert "ClientConnectorDNSError" in outage.cause and outage.failed
    assert not client.stats.retries and client.stats.failures == {"endpoint_down": 1}


async def test_an_endpoint_that_answers_probes_but_fails_every_request_is_one_outage_with_growing_backoff():
    with ScriptedServer(policy=lambda body: {"status": 500, "message": "engine dead"}) as server:
        client = HttpModelClient(server.base_url, retry=RetryPolicy(backoff_initial=0.01, backoff_max=0.02))
        client.gate = EndpointGate(client.base_url, probe=client.probe, max_outage=2.0, probe_initial=0.05)
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(client.chat(_body(f"q{i}")) for i in range(6)), return_exceptions=True), 30
            )
        finally:
            await client.aclose()
        requests = server.counts["requests"]
    assert all(isinstance(result, EndpointDown) for result in results), results
    (outage,) = client.gate.all_outages()  # each failure right after a probe said "back" goes on with it
    assert outage.failed and outage.cause.startswith("HTTP 500")
    assert sum(client.stats.retries.values()) <= 2, "only the failures before the trip took the retry path"
    # The first round, then one per probe that said "back": probes 0.05, 0.1, 0.2, ... s apart fit
    # at most 6 times in the 2 s budget. A backoff that restarted at 0.05 s every round would make ~40.
    assert requests <= 6 * 7, requests


async def test_a_server_that_accepts_no_connection_is_found_down_by_the_connect_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):  # fill the accept queue: later connection attempts get no answer at all
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    client = HttpModelClient(f"http://127.0.0.1:{port}/v1", retry=FAST, timeout=60, connect_timeout=0.3)
    client.gate = EndpointGate(client.base_url, probe=client.probe, max_outage=1.0)
    try:
        with pytest.raises(EndpointDown, match=r"no connection within 0\.3s"):
            await asyncio.wait_for(client.chat(_body()), 20)
    finally:
        await client.aclose()
        for sock in [listener, *fillers]:
            sock.close()
    assert not client.stats.retries


def test_a_pool_closed_while_its_endpoint_is_down_carries_on_with_the_same_outage_when_used_again():
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    pool = ClientPool(retry=FAST, max_outage=60)

    async def while_down() -> None:
        waiting = asyncio.ensure_future(pool.get(url).chat(_body()))
        while not pool.gate(url).waiting:
            await asyncio.sleep(0.01)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await pool.aclose()

    async def once_back() -> str:
        try:
            result = await asyncio.wait_for(pool.get(url).chat(_body("again")), 30)
        finally:
            await pool.aclose()
        return result.message["content"]

    asyncio.run(while_down())
    assert pool.gate(url).down, "closing the pool does not forget that its endpoint is down"
    with ServerProcess(port=port):
        assert asyncio.run(once_back()) == "echo: again", "a new event loop probes the endpoint again"
    (outage,) = pool.outages()
    assert outage.ended_at is not None and outage.held == 2
