"""The recording proxy as an agent meets it: the official OpenAI SDK, a real scripted server behind."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import openai
import orjson
import pytest

from benchmax.auth import ModelRequestContext
from benchmax.client import CallLedger, ClientPool
from benchmax.envs import RolloutScope, SamplingParams, TerminationReason, current_scope, enter_scope
from benchmax.proxy import ProxyError, RecordingProxy
from benchmax.testing import ScriptedServer


def script(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A system message that makes the scripted server play ``steps``, one per assistant message so far."""
    return {"role": "system", "content": f"#script: {orjson.dumps(steps).decode()}"}


ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}
TOOL_THEN_ANSWER = [
    {"tool_calls": [{"id": "call_7", "name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "5"},
]


async def _tool_loop(client: openai.AsyncOpenAI, *, stream: bool) -> str:
    """A plain agent loop: call, run the tool it asked for, call again until it answers."""
    messages = [script(TOOL_THEN_ANSWER), {"role": "user", "content": "2+3?"}]
    for _ in range(4):
        if stream:
            chunks = await client.chat.completions.create(
                model="anything", messages=messages, tools=[ADD_TOOL], tool_choice="auto", stream=True
            )
            content, calls, finish = "", {}, None
            async for chunk in chunks:
                delta = chunk.choices[0].delta
                content += delta.content or ""
                for call in delta.tool_calls or ():
                    slot = calls.setdefault(call.index, {"id": call.id, "name": "", "arguments": ""})
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
                finish = chunk.choices[0].finish_reason or finish
            tool_calls = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls.values()
            ]
        else:
            reply = await client.chat.completions.create(
                model="anything", messages=messages, tools=[ADD_TOOL], tool_choice="auto", temperature=0.3
            )
            choice = reply.choices[0]
            content, finish = choice.message.content or "", choice.finish_reason
            tool_calls = [call.model_dump() for call in choice.message.tool_calls or ()]
        if finish != "tool_calls":
            return content
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for call in tool_calls:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(args["a"] + args["b"])})
    raise AssertionError("the scripted agent never answered")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_tool_calling_agent_round_trips_and_every_call_is_recorded(
    proxy, agent_client, scripted_server, stream
):
    async with proxy.lease("r1") as lease:
        answer = await _tool_loop(agent_client(lease), stream=stream)
    assert answer == "5"
    first, second = lease.calls
    assert (first.index, second.index) == (0, 1)
    assert first.stream is stream and first.model == "anything"
    assert first.tools == (ADD_TOOL,) and first.tool_choice == "auto"
    assert first.finish_reason == "tool_calls"
    (call,) = first.tool_calls
    assert call["id"] == "call_7" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_7", "content": "5"}
    assert second.message["content"] == "5" and second.finish_reason == "stop"
    assert first.usage.prompt_tokens > 0 and second.usage.completion_tokens > 0
    assert all(c.error is None and c.ended_at >= c.started_at and c.model_seconds >= 0 for c in lease.calls)
    assert lease.stop_reason is None
    # every call reached the run's model (not the one the agent named), without stream fields
    assert [body["model"] for body in scripted_server.requests] == ["scripted", "scripted"]
    assert all("stream" not in body and "stream_options" not in body for body in scripted_server.requests)
    if not stream:
        assert first.sampling == {"temperature": 0.3}
        assert scripted_server.requests[0]["temperature"] == 0.3


async def test_a_streamed_reply_carries_usage_when_asked(proxy, agent_client):
    async with proxy.lease("r1") as lease:
        chunks = await agent_client(lease).chat.completions.create(
            model="m",
            messages=[script([{"content": "hello there"}])],
            stream=True,
            stream_options={"include_usage": True},
        )
        seen = [chunk async for chunk in chunks]
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "hello there"
    assert seen[-1].usage is not None and seen[-1].usage.completion_tokens == lease.calls[0].usage.completion_tokens


async def test_token_ids_and_logprobs_are_recorded_when_the_run_asks_for_them(pool, agent_client):
    sampling = SamplingParams(temperature=1.0, logprobs=True, extra_body={"return_token_ids": True})
    with ScriptedServer(token_ids=True) as server:
        async with (
            RecordingProxy(pool, model="scripted", base_url=server.base_url) as proxy,
            proxy.lease("r1", sampling=sampling) as lease,
        ):
            await agent_client(lease).chat.completions.create(
                model="m", messages=[script([{"content": "ab"}])], temperature=0.1
            )
    (call,) = lease.calls
    assert call.completion_token_ids == (ord("a"), ord("b"))
    assert call.completion_logprobs == (-0.5, -0.5)
    assert call.prompt_token_ids and all(isinstance(token, int) for token in call.prompt_token_ids)
    (sent,) = server.requests
    assert sent["logprobs"] is True and sent["return_token_ids"] is True
    assert sent["temperature"] == 1.0, "the run's sampling is sent over the agent's"
    assert call.sampling == {"temperature": 0.1}, "the record keeps what the agent asked"
    turn = call.as_turn()
    assert turn.completion_token_ids == call.completion_token_ids and turn.index == 0


async def test_two_concurrent_leases_never_see_each_others_calls(proxy, agent_client):
    async def agent(rollout_id: str, calls: int) -> tuple:
        async with proxy.lease(rollout_id) as lease:
            client = agent_client(lease)
            for turn in range(calls):
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"{rollout_id} turn {turn}"}]
                )
        return lease.calls

    first, second = await asyncio.gather(agent("a", 3), agent("b", 2))
    assert [c.messages[0]["content"] for c in first] == ["a turn 0", "a turn 1", "a turn 2"]
    assert [c.messages[0]["content"] for c in second] == ["b turn 0", "b turn 1"]
    assert [c.message["content"] for c in second] == ["echo: b turn 0", "echo: b turn 1"]


async def test_another_rollouts_key_an_unknown_key_and_an_ended_lease_are_refused_and_recorded_nowhere(
    proxy, agent_client, scripted_server
):
    async with proxy.lease("a") as a, proxy.lease("b") as b:
        assert a.api_key != b.api_key and a.base_url != b.base_url
        crossed = openai.AsyncOpenAI(base_url=a.base_url, api_key=b.api_key, max_retries=0)
        guessed = openai.AsyncOpenAI(base_url=a.base_url, api_key="bmx-guess", max_retries=0)
        for client in (crossed, guessed):
            with pytest.raises(openai.AuthenticationError) as refused:
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            assert refused.value.code == "invalid_api_key"
            with pytest.raises(openai.AuthenticationError):
                await client.models.list()
            await client.close()
        assert [model.id for model in (await agent_client(a).models.list()).data] == ["scripted"]
    assert a.calls == () and b.calls == ()
    assert scripted_server.requests == []
    with pytest.raises(openai.AuthenticationError):
        await agent_client(a, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "late"}]
        )
    assert a.calls == () and scripted_server.requests == []
    assert a.api_key not in repr(a) and a.api_key not in repr(proxy)


async def test_over_max_calls_the_sdk_raises_at_once_and_the_rollout_stops_for_max_turns(
    proxy, agent_client, scripted_server
):
    async with proxy.lease("r1", max_calls=2) as lease:
        client = agent_client(lease)  # the SDK's default retries: the proxy tells it not to
        for _ in range(2):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.RateLimitError) as over:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert over.value.status_code == 429 and over.value.code == "max_calls_exceeded"
    assert lease.stop_reason == TerminationReason.MAX_TURNS_EXCEEDED
    assert len(lease.calls) == 2 and len(scripted_server.requests) == 2


async def test_a_call_in_flight_at_the_deadline_is_cut_and_later_calls_are_refused(proxy, agent_client):
    async with proxy.lease("r1") as lease:
        client = agent_client(lease)
        pending = asyncio.create_task(
            client.chat.completions.create(model="m", messages=[script([{"sleep": 30, "content": "late"}])])
        )
        while lease.in_flight == 0:
            await asyncio.sleep(0.01)
        lease.deadline = time.monotonic()  # the rollout's time runs out while its call waits on the model
        with pytest.raises(openai.RateLimitError) as cut:
            await pending
        assert cut.value.code == "rollout_deadline_exceeded"
        with pytest.raises(openai.RateLimitError) as after:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert after.value.code == "rollout_deadline_exceeded"
    assert lease.stop_reason == TerminationReason.TIMEOUT
    (call,) = lease.calls
    assert call.message is None and call.error_reason == TerminationReason.TIMEOUT and "deadline" in call.error


async def test_a_lease_whose_time_is_up_refuses_its_first_call(proxy, agent_client, scripted_server):
    async with proxy.lease("r1", timeout=0) as lease:
        with pytest.raises(openai.RateLimitError) as refused:
            await agent_client(lease).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert refused.value.code == "rollout_deadline_exceeded"
    assert lease.stop_reason == TerminationReason.TIMEOUT and lease.calls == () and scripted_server.requests == []


async def test_a_503_is_retried_by_the_client_and_the_agent_sees_one_answer(proxy, agent_client, scripted_server):
    async with proxy.lease("r1") as lease:
        reply = await agent_client(lease, max_retries=0).chat.completions.create(
            model="m", messages=[script([{"fail": {"status": 503, "times": 1, "retry_after": 0}, "content": "ok"}])]
        )
    assert reply.choices[0].message.content == "ok"
    assert scripted_server.counts["status_503"] == 1 and len(scripted_server.requests) == 2
    assert len(lease.calls) == 1 and lease.calls[0].error is None
    assert proxy.clients.totals().retries == {"http_503": 1}


async def test_a_failing_server_reaches_the_agent_as_the_clients_error(proxy, agent_client):
    async with proxy.lease("r1") as lease:
        client = agent_client(lease)
        with pytest.raises(openai.BadRequestError) as context:
            await client.chat.completions.create(model="m", messages=[script([{"error": "context"}])])
        assert context.value.code == "context_length_exceeded"
        with pytest.raises(openai.InternalServerError) as failed:
            await client.chat.completions.create(
                model="m", messages=[script([{"fail": {"status": 500, "times": 99, "retry_after": 0}}])]
            )
        assert failed.value.status_code == 502 and failed.value.code == TerminationReason.MODEL_ERROR
    reasons = [call.error_reason for call in lease.calls]
    assert reasons == [TerminationReason.CONTEXT_EXCEEDED, TerminationReason.MODEL_ERROR]
    assert "gave up after 3 attempts" in lease.calls[1].error


async def test_an_endpoint_down_past_its_outage_budget_fails_the_call_with_the_clients_error(pool, agent_client):
    with ScriptedServer() as server:
        dead = server.base_url
    async with RecordingProxy(pool, model="m", base_url=dead) as proxy, proxy.lease("r1") as lease:
        with pytest.raises(openai.InternalServerError) as down:
            await agent_client(lease, max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
    assert down.value.status_code == 502 and down.value.code == TerminationReason.MODEL_ERROR
    (call,) = lease.calls
    assert call.error_reason == TerminationReason.MODEL_ERROR and call.message is None


async def test_each_call_is_metered_against_its_rollout_in_the_run_ledger(proxy, agent_client):
    ledger = CallLedger()
    with ledger.group() as meter:
        async with proxy.lease("r1") as one, proxy.lease("r2") as two:
            for lease, times in ((one, 2), (two, 1)):
                for _ in range(times):
                    await agent_client(lease).chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "x"}]
                    )
    log = meter.log()
    assert [f.requests for f in log.of("r1")] == [2]
    assert [f.requests for f in log.of("r2")] == [1]
    assert [(f.role, f.model) for f in log.of("r1")] == [("policy", "scripted")]


@pytest.mark.parametrize(
    ("content", "headers", "status", "code"),
    [
        (b"x" * (64 * 1024 + 1), {"Content-Type": "application/json"}, 413, "request_too_large"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', {"Content-Type": "text/plain"}, 415, None),
        (b"{not json", {"Content-Type": "application/json"}, 400, None),
        (b'{"messages": []}', {"Content-Type": "application/json"}, 400, "invalid_messages"),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 3}', {"Content-Type": "application/json"}, 400, None),
    ],
    ids=["oversize", "not-json-type", "bad-json", "no-messages", "several-choices"],
)
async def test_requests_the_proxy_cannot_serve_are_refused_before_anything_is_sent(
    pool, scripted_server, content, headers, status, code
):
    async with (
        RecordingProxy(pool, model="scripted", base_url=scripted_server.base_url, max_body_bytes=64 * 1024) as proxy,
        proxy.lease("r1") as lease,
        httpx.AsyncClient(trust_env=False) as http,
    ):
        reply = await http.post(
            f"{lease.base_url}/chat/completions",
            content=content,
            headers={**headers, "Authorization": f"Bearer {lease.api_key}"},
        )
    assert reply.status_code == status
    assert reply.headers["x-should-retry"] == "false"
    error = reply.json()["error"]
    assert error["message"] and (code is None or error["code"] == code)
    assert lease.calls == () and scripted_server.requests == []


async def test_a_non_loopback_host_is_refused():
    with pytest.raises(ProxyError, match="loopback"):
        RecordingProxy(ClientPool(), model="m", base_url="http://127.0.0.1:1/v1", host="0.0.0.0")


class _ScopeProbe:
    """A run's credentials that note the rollout scope each request is signed in."""

    def __init__(self) -> None:
        self.seen: list[RolloutScope] = []

    async def headers_for_request(self, context: ModelRequestContext) -> dict[str, str]:
        self.seen.append(current_scope())
        return {"Authorization": f"Bearer {RUN_KEY}"}


RUN_KEY = "sk-run-key-0123456789abcdef-SECRET"


async def test_calls_run_in_the_scope_the_lease_was_taken_in_and_keys_stay_on_their_side(
    pool, scripted_server, agent_client
):
    probe = _ScopeProbe()
    hold = object()
    async with RecordingProxy(pool, model="scripted", base_url=scripted_server.base_url, auth=probe) as proxy:
        with enter_scope(RolloutScope(rollout_id="r1", hold=hold)):  # as the engine enters a rollout
            inside = proxy.lease("r1")
            lease = await inside.__aenter__()
        outside = proxy.lease("r2")  # a lease taken outside any rollout is scoped to its rollout id
        other = await outside.__aenter__()
        await agent_client(lease).chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        await agent_client(other).chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
        with pytest.raises(openai.BadRequestError) as echoed:
            await agent_client(lease, max_retries=0).chat.completions.create(
                model="m", messages=[script([{"status": 400, "message": f"bad key {RUN_KEY}"}])]
            )
        await inside.__aexit__(None, None, None)
        await outside.__aexit__(None, None, None)
    assert [(scope.rollout_id, scope.hold) for scope in probe.seen] == [("r1", hold), ("r2", None), ("r1", hold)]
    assert [headers["Authorization"] for headers in scripted_server.headers] == [f"Bearer {RUN_KEY}"] * 3
    assert RUN_KEY not in str(echoed.value) and RUN_KEY not in lease.calls[-1].error
    assert "***" in lease.calls[-1].error


async def test_a_call_in_flight_when_the_lease_ends_is_cancelled_and_recorded(proxy, agent_client):
    async with proxy.lease("r1") as lease:
        client = agent_client(lease, max_retries=0)
        pending = asyncio.create_task(
            client.chat.completions.create(model="m", messages=[script([{"sleep": 30, "content": "late"}])])
        )
        while lease.in_flight == 0:
            await asyncio.sleep(0.01)
    (call,) = lease.calls
    assert call.error_reason == TerminationReason.CANCELLED and call.message is None
    with pytest.raises(openai.InternalServerError) as ended:
        await pending
    assert ended.value.status_code == 503 and ended.value.code == "lease_ended"
