"""One request at a time, a rollout's turns back to back: how the embedded model keeps its KV cache.

llama-cpp-python's server evaluates one prompt at a time and reuses its KV
cache only for a prompt that extends the one before. A client that keeps turns
together (``HttpModelClient.keep_turns_together``) sends one request at a time,
keeps the slot for a rollout's next turn while its tools run, and lets a rollout
that was served before go ahead of new ones.
"""

from __future__ import annotations

import asyncio

from tool_env import ToolThenAnswerEnv

from benchmax.client import ClientPool, HttpModelClient, RequestLimit
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import Example, RolloutRequest, canonical_example_id
from benchmax.testing import ScriptedServer

HOLD = 60.0
"""Long enough that a rollout's next turn always comes back inside it, however loaded the machine."""


def _first_lines(server: ScriptedServer) -> list[str]:
    return [body["messages"][0]["content"].split("\n", 1)[0] for body in server.requests]


async def _rollout(client: HttpModelClient, name: str, turns: int) -> None:
    script = "[" + ", ".join(['{"sleep": 0.02, "content": "ok"}'] * turns) + "]"
    messages: list[dict] = [{"role": "user", "content": f"{name}\n#script: {script}"}]
    for turn in range(turns):
        result = await client.chat({"model": "m", "messages": messages}, rollout_id=name)
        messages += [{"role": "assistant", "content": result.message.get("content") or ""}]
        messages += [{"role": "user", "content": f"turn {turn + 1}"}]
        await asyncio.sleep(0)  # a tool's await: the slot must stay this rollout's meanwhile
    client.end_rollout(name)


async def test_each_rollout_s_turns_reach_the_server_back_to_back_one_request_at_a_time():
    with ScriptedServer() as server:
        client = HttpModelClient(server.base_url)
        client.keep_turns_together(hold=HOLD)
        try:
            await asyncio.wait_for(asyncio.gather(*(_rollout(client, name, 3) for name in "ABC")), 60)
        finally:
            await client.aclose()
        order = _first_lines(server)
    assert order == ["A"] * 3 + ["B"] * 3 + ["C"] * 3, order
    assert client.request_limit == 1


async def test_without_it_the_turns_of_concurrent_rollouts_interleave():
    # the contrast the scheduling exists for: each turn then follows another rollout's prompt
    with ScriptedServer() as server:
        client = HttpModelClient(server.base_url)
        try:
            await asyncio.gather(*(_rollout(client, name, 3) for name in "ABC"))
        finally:
            await client.aclose()
        order = _first_lines(server)
    assert order[:3] == ["A", "B", "C"], order


async def test_a_rollout_served_before_goes_ahead_of_new_ones():
    limit = RequestLimit(1, adaptive=False, hold=HOLD)
    order: list[str] = []
    b_served = asyncio.Event()
    let_b_go = asyncio.Event()

    async def turn(key: str, hold_until: asyncio.Event | None = None) -> None:
        granted = await limit.acquire(key)
        order.append(key)
        if hold_until is not None:
            b_served.set()
            await hold_until.wait()
        # a failed request reserves nothing: its retry queues like any turn
        limit.release(granted, served=False)

    first = await limit.acquire("A")
    order.append("A")
    new_b = asyncio.create_task(turn("B", let_b_go))
    new_c = asyncio.create_task(turn("C"))
    await asyncio.sleep(0)
    assert limit.waiting == 2
    limit.release(first, served=False)  # A's request failed: B (first come) gets the slot...
    await b_served.wait()
    retry_a = asyncio.create_task(turn("A"))  # ... and A's retry, queued after C, goes before it
    await asyncio.sleep(0)
    assert limit.waiting == 2
    let_b_go.set()
    await asyncio.wait_for(asyncio.gather(new_b, new_c, retry_a), 30)
    assert order == ["A", "B", "A", "C"], order


async def test_a_reserved_slot_goes_to_the_next_rollout_once_the_hold_lapses():
    limit = RequestLimit(1, adaptive=False, hold=0.01)
    granted = await limit.acquire("A")
    waiting = asyncio.create_task(limit.acquire("B"))
    limit.release(granted, key="A")  # reserved for A, which never comes back
    await asyncio.sleep(0)
    assert not waiting.done() and limit.in_use == 1
    await asyncio.wait_for(waiting, 30)
    assert limit.in_use == 1 and limit.waiting == 0


async def test_forgetting_a_rollout_frees_its_reserved_slot_at_once():
    limit = RequestLimit(1, adaptive=False, hold=HOLD)
    granted = await limit.acquire("A")
    waiting = asyncio.create_task(limit.acquire("B"))
    limit.release(granted, key="A")
    await asyncio.sleep(0)
    assert not waiting.done(), "the slot waits for A's next turn"
    limit.forget("A")
    await asyncio.wait_for(waiting, 30)


def _request(name: str, base_url: str) -> RolloutRequest:
    script = '[{"tool_calls": [{"name": "ping", "arguments": {}}]}, {"content": "done"}]'
    payload = {"prompt_messages": [{"role": "user", "content": f"{name}\n#script: {script}"}]}
    return RolloutRequest(name, Example(canonical_example_id(payload), payload), "scripted", base_url)


async def test_the_engine_frees_the_slot_when_a_rollout_ends_and_keeps_it_between_its_turns():
    # with a 60 s hold, a rollout whose end the engine did not tell would hold up the next for 60 s
    with ScriptedServer() as server:
        pool = ClientPool()
        pool.http(server.base_url).keep_turns_together(hold=HOLD)
        engine = Engine(ToolThenAnswerEnv(), EngineConfig(), clients=pool)
        try:
            groups = (engine.run_group([_request(name, server.base_url)]) for name in ("r1", "r2", "r3", "r4"))
            results = await asyncio.wait_for(asyncio.gather(*groups), 30)
        finally:
            await engine.aclose()
        order = _first_lines(server)
    assert [result.outcomes[0].rewards for result in results] == [{"one_tool_two_turns": 1.0}] * 4
    assert order == ["r1", "r1", "r2", "r2", "r3", "r3", "r4", "r4"], order
