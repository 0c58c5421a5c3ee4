"""The model client as a trainer sees it: pass-through, auth, tokens, retries, pooling."""

from __future__ import annotations

import asyncio
import email.utils
import time

import orjson
import pytest

from benchmax.client import ClientPool, EndpointDown, HttpModelClient, ModelError, RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, ListDataset, SamplingParams, StaticBearerAuth
from benchmax.testing import ScriptedServer

SECRET = "sk-test-0123456789abcdef-SECRET"


class PlainEnv(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "seen"

    async def compute_reward(self, rollout):
        return {"ok": 1.0}


TOOL_THEN_ANSWER = [{"tool_calls": [{"name": "look"}]}, {"content": "the answer"}]


async def test_sampling_parameters_and_extra_body_reach_the_server_on_every_turn(
    make_engine, make_request, scripted_server
):
    sampling = SamplingParams(
        temperature=0.7,
        top_p=0.9,
        max_tokens=128,
        seed=1234,
        stop=("</answer>", "\n\n"),
        logprobs=True,
        extra_body={"top_k": 20, "repetition_penalty": 1.1, "return_token_ids": True},
    )
    request = make_request(TOOL_THEN_ANSWER, sampling=sampling)
    result = await make_engine(PlainEnv()).run_group([request])
    assert result.outcomes[0].termination_reason == "finished"
    assert result.outcomes[0].sampling == sampling
    assert len(scripted_server.requests) == 2
    for body in scripted_server.requests:
        assert body["model"] == "scripted"
        assert {key: body[key] for key in sampling.to_body()} == {
            "temperature": 0.7,
            "top_p": 0.9,
            "max_tokens": 128,
            "seed": 1234,
            "stop": ["</answer>", "\n\n"],
            "logprobs": True,
            "top_k": 20,
            "repetition_penalty": 1.1,
            "return_token_ids": True,
        }


async def test_unset_sampling_parameters_are_left_to_the_server(make_engine, make_request, scripted_server):
    await make_engine(PlainEnv()).run_group([make_request([{"content": "x"}])])
    (body,) = scripted_server.requests
    assert set(body) == {"model", "messages", "tools"}


async def test_extra_body_cannot_replace_the_transcript(make_engine, make_request, scripted_server):
    sampling = SamplingParams(extra_body={"messages": [], "model": "other"})
    await make_engine(PlainEnv()).run_group([make_request([{"content": "x"}], sampling=sampling)])
    (body,) = scripted_server.requests
    assert body["model"] == "scripted"
    assert body["messages"][0]["role"] == "user"


async def test_the_api_key_is_sent_as_a_bearer_header_and_never_kept(make_engine, make_request, scripted_server):
    auth = StaticBearerAuth(SECRET)
    retried = make_request([{"fail": {"status": 503, "times": 1, "retry_after": 0}, "content": "x"}], model_auth=auth)
    # A proxy that echoes the key in its error; the policy answers prompts without a script.
    scripted_server.policy = lambda body: {
        "status": 401,
        "message": f"Incorrect API key provided: {SECRET}",
    }
    echoed = make_request(None, model_auth=auth, text="no script here")
    engine = make_engine(PlainEnv(), EngineConfig(retry=RetryPolicy(backoff_initial=0.01)))
    outcomes = [
        *(await engine.run_group([retried])).outcomes,
        *(await engine.run_group([echoed])).outcomes,
    ]
    assert {headers["Authorization"] for headers in scripted_server.headers} == {f"Bearer {SECRET}"}
    assert [o.termination_reason for o in outcomes] == ["finished", "model_error"]
    assert outcomes[1].error.endswith("Incorrect API key provided: ***")
    assert [e.logger for e in outcomes[0].logs] == ["benchmax.client"]
    for text in [
        repr(retried),
        repr(auth),
        repr(engine.clients.get(scripted_server.base_url)),
        *(repr(outcome) for outcome in outcomes),
        *(repr(entry) for outcome in outcomes for entry in outcome.logs),
    ]:
        assert SECRET not in text


async def test_no_authorization_header_without_a_key(make_engine, make_request, scripted_server):
    await make_engine(PlainEnv()).run_group([make_request([{"content": "x"}])])
    assert "Authorization" not in scripted_server.headers[0]


def test_a_key_can_come_from_an_environment_variable(monkeypatch):
    monkeypatch.setenv("BENCHMAX_TEST_KEY", SECRET)
    assert StaticBearerAuth.from_env("BENCHMAX_TEST_KEY").headers() == {"Authorization": f"Bearer {SECRET}"}
    monkeypatch.delenv("BENCHMAX_TEST_KEY")
    with pytest.raises(ValueError, match="BENCHMAX_TEST_KEY is not set"):
        StaticBearerAuth.from_env("BENCHMAX_TEST_KEY")


async def test_token_ids_and_logprobs_are_kept_per_turn_when_the_server_returns_them(make_engine, make_request):
    with ScriptedServer(token_ids=True) as server:
        request = make_request(TOOL_THEN_ANSWER)
        request = type(request)(request.rollout_id, request.example, request.model, server.base_url)
        result = await make_engine(PlainEnv()).run_group([request])
    (outcome,) = result.outcomes
    first, second = outcome.turns
    assert first.completion_token_ids == (0,)
    assert second.completion_token_ids == tuple(ord(c) for c in "the answer")
    assert second.completion_logprobs == (-0.5,) * len("the answer")
    assert first.prompt_token_ids and second.prompt_token_ids
    assert len(second.prompt_token_ids) >= len(first.prompt_token_ids)


async def test_token_fields_are_none_when_the_server_does_not_send_them(make_engine, make_request):
    result = await make_engine(PlainEnv()).run_group([make_request(TOOL_THEN_ANSWER)])
    for turn in result.outcomes[0].turns:
        assert turn.prompt_token_ids is None
        assert turn.completion_token_ids is None
        assert turn.completion_logprobs is None


async def test_usage_and_timings_are_recorded_per_turn_and_summed(make_engine, make_request):
    result = await make_engine(PlainEnv()).run_group([make_request(TOOL_THEN_ANSWER)])
    (outcome,) = result.outcomes
    assert len(outcome.turns) == 2
    assert [turn.index for turn in outcome.turns] == [0, 1]
    assert all(turn.usage.prompt_tokens > 0 for turn in outcome.turns)
    assert outcome.usage.completion_tokens == sum(t.usage.completion_tokens for t in outcome.turns)
    assert outcome.usage.total_tokens == outcome.usage.prompt_tokens + outcome.usage.completion_tokens
    assert all(turn.model_seconds > 0 for turn in outcome.turns)
    assert outcome.turns[0].tool_seconds > 0
    assert outcome.seconds >= sum(turn.model_seconds for turn in outcome.turns)


async def test_retry_after_is_honoured(scripted_server):
    client = HttpModelClient(
        scripted_server.base_url,
        retry=RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.01),
    )
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": '#script: [{"fail": {"status": 429, "retry_after": 1}, "content": "ok"}]',
            }
        ],
    }
    try:
        clock = time.perf_counter()
        result = await client.chat(body)
        waited = time.perf_counter() - clock
    finally:
        await client.aclose()
    assert result.message["content"] == "ok"
    assert 0.9 <= waited < 3
    assert client.stats.snapshot() == {"requests": 2, "retries": {"http_429": 1}, "failures": {}, "resent": 0}
    assert not client.gate.outages, "a 429 takes the per-request retry path; it is not an outage"


async def test_retry_after_as_an_http_date_is_honoured(scripted_server):
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    client = HttpModelClient(scripted_server.base_url, retry=RetryPolicy(backoff_initial=0.01, backoff_max=0.01))
    waited = await _seconds_to_answer(client, [{"fail": {"status": 503, "retry_after": when}, "content": "ok"}])
    assert 0.5 <= waited < 4


async def test_retry_after_is_capped_by_the_policy(scripted_server):
    client = HttpModelClient(
        scripted_server.base_url,
        retry=RetryPolicy(backoff_initial=0.01, backoff_max=0.01, retry_after_max=0.2),
    )
    waited = await _seconds_to_answer(client, [{"fail": {"status": 503, "retry_after": 3600}, "content": "ok"}])
    assert waited < 2


async def _seconds_to_answer(client, steps):
    """How long ``client`` took to get an answer through a scripted failure; closes it."""
    body = {"model": "m", "messages": [{"role": "user", "content": f"#script: {orjson.dumps(steps).decode()}"}]}
    try:
        clock = time.perf_counter()
        await client.chat(body)
        return time.perf_counter() - clock
    finally:
        await client.aclose()


async def test_a_non_retryable_error_raises_model_error_with_the_status(scripted_server):
    client = HttpModelClient(scripted_server.base_url)
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": '#script: [{"status": 404, "message": "no model"}]'}],
    }
    try:
        with pytest.raises(ModelError, match="HTTP 404: invalid_request_error: no model") as info:
            await client.chat(body)
    finally:
        await client.aclose()
    assert (info.value.reason, info.value.status) == ("model_error", 404)
    assert client.stats.requests == 1


async def test_an_unreachable_server_holds_the_request_and_fails_it_past_the_outage_budget():
    client = HttpModelClient(
        "http://127.0.0.1:9/v1", retry=RetryPolicy(max_attempts=2, backoff_initial=0.01), max_outage=0.5
    )
    try:
        with pytest.raises(EndpointDown, match=r"endpoint http://127.0.0.1:9/v1 down for \d+ s") as info:
            await client.chat({"model": "m", "messages": []})
    finally:
        await client.aclose()
    assert info.value.reason == "model_error"
    (outage,) = client.gate.all_outages()
    assert outage.failed and outage.held >= 1
    assert client.stats.retries == {}, "waiting for a down endpoint spends no retries"


async def test_one_client_per_endpoint_is_shared_by_all_rollouts_whatever_their_keys(
    make_engine, make_request, scripted_server
):
    engine = make_engine(PlainEnv())
    requests = [
        make_request([{"content": "x"}], text=f"q{i}", model_auth=StaticBearerAuth(f"key-{i % 2}")) for i in range(20)
    ]
    await asyncio.gather(*(engine.run_group([request]) for request in requests))
    pool = engine.clients
    client = pool.get(scripted_server.base_url)
    assert pool.get(scripted_server.base_url + "/") is client
    assert client.stats.requests == 20
    assert pool.stats()["requests"] == 20
    assert {headers["Authorization"] for headers in scripted_server.headers} == {"Bearer key-0", "Bearer key-1"}


async def test_a_registered_client_serves_its_base_url(make_engine, make_request):
    from benchmax.client import ChatResult
    from benchmax.envs import Usage

    class InProcess:
        def __init__(self) -> None:
            self.rollouts: list[str | None] = []

        async def chat(self, body, *, rollout_id=None):
            self.rollouts.append(rollout_id)
            return ChatResult({"role": "assistant", "content": "local"}, "stop", Usage(3, 1))

        async def aclose(self) -> None:
            pass

    policy = InProcess()
    pool = ClientPool()
    pool.register("http://policy.local/v1", policy)
    engine = make_engine(PlainEnv(), clients=pool)
    request = make_request([{"content": "x"}], rollout_id="local-1")
    request = type(request)(request.rollout_id, request.example, "m", "http://policy.local/v1")
    result = await engine.run_group([request])
    assert result.outcomes[0].messages[-1]["content"] == "local"
    assert policy.rollouts == ["local-1"]


async def test_the_per_endpoint_request_limit_bounds_requests_in_flight_across_rollouts():
    import asyncio

    from aiohttp import web

    from benchmax.client import HttpModelClient

    in_flight = 0
    peak = 0

    async def chat(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return web.json_response(
            {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    client = HttpModelClient(f"http://127.0.0.1:{port}/v1", max_requests=3)
    try:
        results = await asyncio.gather(*(client.chat({"model": "m", "messages": []}) for _ in range(20)))
    finally:
        await client.aclose()
        await runner.cleanup()
    assert [result.message["content"] for result in results] == ["ok"] * 20
    assert peak == 3
