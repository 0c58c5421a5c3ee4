"""The scripted OpenAI-compatible server itself, spoken to over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import aiohttp
import orjson
import pytest

from benchmax.testing import ScriptedServer, echo_policy, find_script


async def post(server_url: str, messages: list[dict], **extra) -> tuple[int, dict, dict]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server_url}/chat/completions", json={"model": "m", "messages": messages, **extra}) as response,
    ):
        raw = await response.read()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = {"raw": raw.decode()}
        return response.status, data, dict(response.headers)


def scripted(steps: list[dict], *history: dict) -> list[dict]:
    return [{"role": "user", "content": f"go\n#script: {orjson.dumps(steps).decode()}"}, *history]


async def test_step_n_answers_the_request_with_n_assistant_messages(scripted_server):
    steps = [{"content": "first"}, {"content": "second"}]
    _, one, _ = await post(scripted_server.base_url, scripted(steps))
    _, two, _ = await post(
        scripted_server.base_url,
        scripted(steps, {"role": "assistant", "content": "first"}, {"role": "user", "content": "?"}),
    )
    assert one["choices"][0]["message"] == {"role": "assistant", "content": "first"}
    assert two["choices"][0]["message"]["content"] == "second"
    assert one["choices"][0]["finish_reason"] == "stop"
    assert one["object"] == "chat.completion"
    assert one["usage"]["total_tokens"] == one["usage"]["prompt_tokens"] + one["usage"]["completion_tokens"]


async def test_a_script_past_its_end_says_so(scripted_server):
    history = [{"role": "assistant", "content": "x"}]
    _, data, _ = await post(scripted_server.base_url, scripted([{"content": "x"}], *history))
    assert data["choices"][0]["message"]["content"] == "(script ended)"


async def test_tool_call_steps_become_openai_tool_calls(scripted_server):
    steps = [
        {
            "tool_calls": [
                {"name": "add", "arguments": {"a": 1}},
                {"name": "raw", "arguments": "{broken", "id": "mine"},
            ]
        }
    ]
    _, data, _ = await post(scripted_server.base_url, scripted(steps))
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}},
        {"id": "mine", "type": "function", "function": {"name": "raw", "arguments": "{broken"}},
    ]


async def test_error_steps_answer_with_openai_shaped_errors(scripted_server):
    status, context, _ = await post(scripted_server.base_url, scripted([{"error": "context"}]))
    assert status == 400
    assert context["error"]["code"] == "context_length_exceeded"
    status, plain, _ = await post(scripted_server.base_url, scripted([{"status": 418, "message": "teapot"}]))
    assert (status, plain["error"]["message"]) == (418, "teapot")
    status, raw, _ = await post(scripted_server.base_url, scripted([{"status": 400, "body": {"object": "error"}}]))
    assert (status, raw) == (400, {"object": "error"})
    assert scripted_server.counts["context_errors"] == 1


async def test_faults_fire_the_given_number_of_times_then_the_step_answers(scripted_server):
    messages = scripted([{"fail": {"status": 503, "times": 2, "retry_after": 7}, "content": "ok"}])
    first = await post(scripted_server.base_url, messages)
    second = await post(scripted_server.base_url, messages)
    third = await post(scripted_server.base_url, messages)
    assert [first[0], second[0], third[0]] == [503, 503, 200]
    assert first[2]["Retry-After"] == "7"
    assert third[1]["choices"][0]["message"]["content"] == "ok"
    assert scripted_server.counts["status_503"] == 2


async def test_a_malformed_fault_sends_broken_json(scripted_server):
    messages = scripted([{"fail": {"malformed": True}, "content": "ok"}])
    status, data, _ = await post(scripted_server.base_url, messages)
    assert status == 200
    assert data == {"raw": '{"choices": ['}


async def test_a_reset_fault_drops_the_connection(scripted_server):
    messages = scripted([{"fail": {"reset": True}, "content": "ok"}])
    with pytest.raises(aiohttp.ClientError):
        await post(scripted_server.base_url, messages)
    status, _, _ = await post(scripted_server.base_url, messages)
    assert status == 200


async def test_sleep_delays_the_answer(scripted_server):
    clock = time.perf_counter()
    await post(scripted_server.base_url, scripted([{"sleep": 0.3, "content": "late"}]))
    assert time.perf_counter() - clock >= 0.3


async def test_without_a_script_the_policy_answers_and_requests_are_logged(scripted_server):
    _, data, _ = await post(scripted_server.base_url, [{"role": "user", "content": "hello"}], temperature=0.5)
    assert data["choices"][0]["message"]["content"] == "echo: hello"
    scripted_server.policy = lambda body: {"content": f"{len(body['messages'])} messages"}
    _, data, _ = await post(scripted_server.base_url, [{"role": "user", "content": "hello"}])
    assert data["choices"][0]["message"]["content"] == "1 messages"
    assert scripted_server.requests[0]["temperature"] == 0.5
    assert len(scripted_server.headers) == 2
    assert scripted_server.counts["requests"] == 2


async def test_token_ids_and_logprobs_are_returned_on_request():
    with ScriptedServer(token_ids=True) as server:
        _, data, _ = await post(server.base_url, scripted([{"content": "hi"}]))
    choice = data["choices"][0]
    assert choice["token_ids"] == [ord("h"), ord("i")]
    assert [item["logprob"] for item in choice["logprobs"]["content"]] == [-0.5, -0.5]
    assert data["prompt_token_ids"]


async def test_models_route_lists_the_scripted_model(scripted_server):
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{scripted_server.base_url}/models") as response,
    ):
        data = await response.json()
    assert data["data"][0]["id"] == "scripted"


def test_find_script_reads_the_first_script_line_and_echo_policy_echoes():
    assert find_script([{"role": "user", "content": "plain"}]) is None
    assert find_script(scripted([{"content": "x"}])) == [{"content": "x"}]
    assert echo_policy({"messages": [{"role": "user", "content": "hi"}]}) == {"content": "echo: hi"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_the_server_runs_as_a_process(tmp_path):
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.testing", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 20
        while True:
            try:
                status, data, _ = await post(url, scripted([{"content": "from a process"}]))
                break
            except aiohttp.ClientConnectionError:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "server process did not start"
                await asyncio.sleep(0.1)
        assert (status, data["choices"][0]["message"]["content"]) == (200, "from a process")
    finally:
        process.terminate()
        process.wait(10)
        warnings = process.stderr.read().decode()
        process.stderr.close()
    assert "RuntimeWarning" not in warnings, warnings


async def test_embeddings_are_deterministic_per_text_and_logged():
    with ScriptedServer(embedding_dims=4) as server:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{server.base_url}/embeddings",
                json={"model": "e", "input": ["a", "b", "a"]},
                headers={"Authorization": "Bearer k"},
            ) as response,
        ):
            data = orjson.loads(await response.read())
            assert response.status == 200
        async with aiohttp.ClientSession() as session, session.post(
            f"{server.base_url}/embeddings", json={"model": "e", "input": [1]}
        ) as bad:
            assert bad.status == 400
    vectors = [item["embedding"] for item in data["data"]]
    assert [item["index"] for item in data["data"]] == [0, 1, 2]
    assert vectors[0] == vectors[2] != vectors[1]
    assert len(vectors[0]) == 4 and all(-1 <= x < 1 for x in vectors[0])
    assert server.counts["embeddings"] == 2
    assert server.headers[0]["Authorization"] == "Bearer k"


@pytest.mark.parametrize(
    "step",
    [
        {"content": "forty-two"},
        {"tool_calls": [{"name": "add", "arguments": {"a": 1}}]},
        {"content": "cut", "finish_reason": "length"},
    ],
)
async def test_a_streamed_request_gets_the_same_reply_as_server_sent_events(scripted_server, step):
    import openai

    client = openai.AsyncOpenAI(base_url=scripted_server.base_url, api_key="sk-test")
    messages = scripted([step])
    whole = await client.chat.completions.create(model="m", messages=messages)
    stream = await client.chat.completions.create(
        model="m", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    content, calls, finish, usage = "", {}, None, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                calls[call.index] = (call.id, call.function.name, call.function.arguments)
            finish = choice.finish_reason or finish
    await client.close()
    message = whole.choices[0].message
    assert content == (message.content or "")
    assert list(calls.values()) == [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
