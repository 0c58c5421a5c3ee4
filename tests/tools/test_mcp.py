"""``benchmax.tools.mcp``: a real MCP server's tools, driven by the scripted model through the engine."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from benchmax.engine import EngineConfig, validate_tools
from benchmax.envs import BaseEnv, Example, ListDataset, RolloutFailure, RolloutRequest
from benchmax.testing import ScriptedServer
from benchmax.tools.mcp import MCP_ERROR, HttpServer, McpTools, StdioServer, _openai_tools, _tool_result

FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")
FIXTURE_SERVER = StdioServer(sys.executable, [str(FIXTURE)])


class FixtureEnv(BaseEnv):
    """An env whose tools are the fixture MCP server's; remembers the server pids it saw."""

    max_turns = 4

    def __init__(self, tools: McpTools, *, rollout_server: StdioServer | None = None) -> None:
        super().__init__()
        self.mcp = tools
        self.rollout_server = rollout_server
        self.pids: dict[str, int] = {}

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        async with self.mcp.session(rollout_id, server=self.rollout_server):
            yield

    async def list_tools(self):
        return await self.mcp.list_tools()

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        result = await self.mcp.call(rollout_id, tool_name, tool_args)
        if tool_name == "pid":
            self.pids[rollout_id] = int(result)
        return result

    async def compute_reward(self, rollout):
        return {"ran": 1.0}

    async def aclose(self):
        await self.mcp.aclose()


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def tool_results(outcome) -> list:
    return [message["content"] for message in outcome.messages if message["role"] == "tool"]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in status


def fixture_children() -> list[int]:
    """This test process's children that run the fixture server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and str(FIXTURE).encode() in cmdline and running(int(entry.name)):
            found.append(int(entry.name))
    return found


async def gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while running(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not running(pid)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_fixture_server() -> Iterator[tuple[str, subprocess.Popen]]:
    """The fixture server on streamable HTTP at a free loopback port: ``(url, process)``."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, "the HTTP fixture server exited at start"
                assert time.monotonic() < deadline, "the HTTP fixture server did not listen within 30 s"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        process.wait()


async def test_mcp_tools_become_openai_function_tools_that_the_engine_accepts():
    tools = await McpTools(FIXTURE_SERVER).list_tools()
    by_name = validate_tools(tools, owner="FixtureEnv")
    assert list(by_name) == ["echo", "add", "fail", "picture", "document", "fixture_echo-2", "sleep", "crash", "pid"]
    assert by_name["echo"] == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Say ``text`` back.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"title": "Text", "type": "string"}},
                "required": ["text"],
            },
        },
    }
    assert by_name["crash"]["function"]["parameters"]["properties"]["code"]["default"] == 3
    assert fixture_children() == []


async def test_prefix_and_include_choose_what_the_model_sees_and_calls_map_back():
    tools = McpTools(FIXTURE_SERVER, per_rollout=False, prefix="fx_", include={"echo", "fixture.echo-2"})
    try:
        listed = await tools.list_tools()
        assert [tool["function"]["name"] for tool in listed] == ["fx_echo", "fx_fixture_echo-2"]
        assert await tools.call("any", "fx_fixture_echo-2", {"text": "shout"}) == "SHOUT"
        with pytest.raises(Exception, match=r"unknown tool 'echo'; available tools: fx_echo, fx_fixture_echo-2"):
            await tools.call("any", "echo", {"text": "x"})
    finally:
        await tools.aclose()


async def test_a_rollout_sees_text_structured_image_and_resource_results(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    steps = [
        {"tool_calls": [call("echo", text="hi"), call("add", a=2, b=3), call("picture"), call("document")]},
        {"tool_calls": [call("fixture_echo-2", text="dots"), call("pid")]},
        {"content": "done"},
    ]
    outcome = await make_engine(env).run_rollout(make_request(steps))
    assert outcome.termination_reason == "finished", outcome.error
    echo, added, picture, document, dotted, pid = tool_results(outcome)
    assert echo == "hi"
    assert added == '{\n  "sum": 5\n}'
    assert picture[0] == {"type": "text", "text": "a pixel"}
    assert picture[1]["type"] == "image_url"
    assert picture[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert document == "[resource file:///doc.txt]\nhello doc\n[resource link other: file:///other.txt]"
    assert dotted == "DOTS"
    assert int(pid) == env.pids[outcome.rollout_id]
    assert await gone(env.pids[outcome.rollout_id])


async def test_a_tool_error_goes_back_to_the_model_and_the_rollout_goes_on(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    steps = [
        {"tool_calls": [call("fail", message="the disk is full"), call("add", a=1, b="two")]},
        {"tool_calls": [call("echo", text="recovered")]},
        {"content": "done"},
    ]
    outcome = await make_engine(env).run_rollout(make_request(steps))
    assert outcome.termination_reason == "finished", outcome.error
    failed, bad_arguments, echo = tool_results(outcome)
    assert failed == "error: Error executing tool fail: the disk is full"
    # Arguments reach the server as the model sent them (0.2.x); the server's own check answers.
    assert bad_arguments.startswith("error: ") and "two" in bad_arguments
    assert echo == "recovered"
    assert outcome.rewards == {"ran": 1.0}


async def test_each_rollout_has_its_own_server_process_and_none_outlives_its_rollout(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    engine = make_engine(env)
    requests = [make_request([{"tool_calls": [call("pid")]}, {"content": "done"}]) for _ in range(3)]
    outcomes = await asyncio.gather(*(engine.run_rollout(request) for request in requests))
    assert [outcome.termination_reason for outcome in outcomes] == ["finished"] * 3
    assert len(set(env.pids.values())) == 3
    for pid in env.pids.values():
        assert await gone(pid)
    assert fixture_children() == []


async def test_the_server_is_stopped_when_the_rollout_is_cancelled(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    request = make_request([{"tool_calls": [call("pid")]}, {"tool_calls": [call("sleep", seconds=60)]}])
    task = asyncio.create_task(make_engine(env).run_rollout(request))
    deadline = time.monotonic() + 60
    while request.rollout_id not in env.pids and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # let the sleep call reach the server
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(env.pids[request.rollout_id])
    assert fixture_children() == []


async def test_a_tool_call_past_the_engines_tool_timeout_stops_its_server(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    request = make_request([{"tool_calls": [call("pid")]}, {"tool_calls": [call("sleep", seconds=60)]}])
    outcome = await make_engine(env, EngineConfig(tool_timeout=1)).run_rollout(request)
    assert outcome.termination_reason == "timeout"
    assert outcome.error == "tool call 'sleep' ran past its 1s limit"
    assert await gone(env.pids[request.rollout_id])


async def test_a_call_past_call_timeout_ends_the_rollout_as_timeout(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER, call_timeout=0.5))
    outcome = await make_engine(env).run_rollout(make_request([{"tool_calls": [call("sleep", seconds=30)]}]))
    assert outcome.termination_reason == "timeout"
    assert "did not answer tools/call 'sleep' within 0.5s" in outcome.error
    assert outcome.rewards == {}


async def test_a_server_that_crashes_mid_call_ends_the_rollout_with_mcp_error(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    outcome = await make_engine(env).run_rollout(make_request([{"tool_calls": [call("crash", code=7)]}]))
    assert outcome.termination_reason == MCP_ERROR
    assert "closed the connection during tools/call 'crash' (the server exited or crashed)" in outcome.error
    assert "fixture server crashing with code 7" in outcome.error  # the tail of its stderr
    assert outcome.rewards == {}


async def test_a_server_killed_between_turns_ends_the_rollout_with_mcp_error(make_engine):
    def policy(body: dict) -> dict:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [call("pid")]}
        os.kill(int(results[0]), signal.SIGKILL)
        return {"tool_calls": [call("echo", text="anyone there?")]}

    env = FixtureEnv(McpTools(FIXTURE_SERVER))
    example = Example("killed", {"prompt_messages": [{"role": "user", "content": "go"}]})
    with ScriptedServer(policy) as server:
        outcome = await make_engine(env).run_rollout(RolloutRequest("k", example, "scripted", server.base_url))
    assert outcome.termination_reason == MCP_ERROR
    assert "closed the connection during tools/call 'echo'" in outcome.error
    assert fixture_children() == []


async def test_a_server_that_cannot_start_fails_the_rollout_with_a_clear_reason(make_request, make_engine):
    broken = StdioServer(sys.executable, ["-c", "import sys; sys.exit('missing config file settings.toml')"])
    missing = StdioServer("/nonexistent/mcp-server")
    env = FixtureEnv(McpTools(FIXTURE_SERVER), rollout_server=broken)
    outcome = await make_engine(env).run_rollout(make_request([{"content": "never asked"}]))
    assert outcome.termination_reason == MCP_ERROR
    assert "could not be started" in outcome.error
    assert "missing config file settings.toml" in outcome.error
    env.rollout_server = missing
    outcome = await make_engine(env).run_rollout(make_request([{"content": "never asked"}]))
    assert outcome.termination_reason == MCP_ERROR
    assert "MCP server `/nonexistent/mcp-server` (stdio, rollout" in outcome.error
    assert "FileNotFoundError" in outcome.error


async def test_a_shared_session_serves_every_rollout_from_one_process_until_aclose(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER, per_rollout=False))
    engine = make_engine(env)
    requests = [make_request([{"tool_calls": [call("pid")]}, {"content": "done"}]) for _ in range(3)]
    outcomes = await asyncio.gather(*(engine.run_rollout(request) for request in requests))
    assert [outcome.termination_reason for outcome in outcomes] == ["finished"] * 3
    (pid,) = set(env.pids.values())
    assert running(pid)
    await env.aclose()
    assert await gone(pid)


async def test_a_shared_session_whose_server_died_is_restarted_for_the_next_rollout(make_request, make_engine):
    env = FixtureEnv(McpTools(FIXTURE_SERVER, per_rollout=False))
    engine = make_engine(env)
    first = await engine.run_rollout(make_request([{"tool_calls": [call("pid")]}, {"tool_calls": [call("crash")]}]))
    assert first.termination_reason == MCP_ERROR
    second = await engine.run_rollout(make_request([{"tool_calls": [call("pid")]}, {"content": "done"}]))
    assert second.termination_reason == "finished", second.error
    assert env.pids[first.rollout_id] != env.pids[second.rollout_id]
    await env.aclose()
    assert await gone(env.pids[second.rollout_id])


async def test_the_streamable_http_transport_serves_rollouts(http_fixture_server, make_request, make_engine):
    url, process = http_fixture_server
    env = FixtureEnv(McpTools(HttpServer(url, headers={"Authorization": "Bearer not-logged"})))
    steps = [{"tool_calls": [call("echo", text="over http"), call("add", a=20, b=22), call("pid")]}, {"content": "ok"}]
    outcome = await make_engine(env).run_rollout(make_request(steps))
    assert outcome.termination_reason == "finished", outcome.error
    assert tool_results(outcome) == ["over http", '{\n  "sum": 42\n}', str(process.pid)]
    assert "not-logged" not in repr(env.mcp.server)


async def test_an_http_server_that_died_ends_the_rollout_with_mcp_error(http_fixture_server, make_engine):
    url, process = http_fixture_server

    def policy(body: dict) -> dict:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"tool_calls": [call("echo", text="first")]}
        process.kill()
        process.wait()
        return {"tool_calls": [call("echo", text="second")]}

    env = FixtureEnv(McpTools(HttpServer(url)))
    example = Example("http-death", {"prompt_messages": [{"role": "user", "content": "go"}]})
    with ScriptedServer(policy) as server:
        outcome = await make_engine(env).run_rollout(RolloutRequest("h", example, "scripted", server.base_url))
    assert outcome.termination_reason == MCP_ERROR
    assert f"MCP server `{url}` (HTTP, rollout h)" in outcome.error
    assert tool_results(outcome)[0] == "first"


async def test_an_unreachable_http_server_is_an_mcp_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    tools = McpTools(HttpServer(url), start_timeout=20)
    with pytest.raises(RolloutFailure) as failure:
        async with tools.session("r1"):
            pass
    assert failure.value.reason == MCP_ERROR
    assert failure.value.message.startswith(f"MCP server `{url}` (HTTP, rollout r1) could not be started: ConnectError")


async def test_calling_without_a_session_in_per_rollout_mode_names_the_fix():
    tools = McpTools(FIXTURE_SERVER)
    with pytest.raises(RuntimeError, match=r"no MCP session for rollout 'r9': open one with `async with"):
        await tools.call("r9", "echo", {"text": "x"})


def test_bad_settings_are_refused_with_the_setting_named():
    with pytest.raises(ValueError, match="call_timeout must be > 0"):
        McpTools(FIXTURE_SERVER, call_timeout=0)
    with pytest.raises(ValueError, match="prefix may hold only"):
        McpTools(FIXTURE_SERVER, prefix="my tools.")
    with pytest.raises(TypeError, match="StdioServer or an HttpServer"):
        McpTools("python server.py")  # type: ignore[arg-type]


def test_tool_names_are_made_safe_for_openai_and_kept_distinct():
    listing = [
        {"name": "files/read", "inputSchema": {"type": "object", "$schema": "x", "title": "T"}},
        {"name": "files.read"},
        {"name": "x" * 80, "description": "long", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "x" * 81, "title": "Long title"},
    ]
    tools, names = _openai_tools(listing, "", None)
    assert list(names) == ["files_read", "files_read_2", "x" * 64, "x" * 62 + "_2"]
    assert names["files_read_2"] == "files.read"
    assert tools[0]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert tools[3]["function"]["description"] == "Long title"


def test_results_without_text_are_described_not_dropped():
    blob = {"type": "resource", "resource": {"uri": "file:///a.bin", "mimeType": "application/zip", "blob": "AAAA"}}
    audio = {"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"}
    assert _tool_result({"content": [blob, audio]}, prefer_structured=False) == (
        "[resource file:///a.bin: application/zip, 3 bytes, not shown]\n[audio audio/wav, 6 bytes, not shown]"
    )
    structured = {"content": [{"type": "text", "text": "3 rows"}], "structuredContent": {"rows": 3}}
    assert _tool_result(structured, prefer_structured=False) == "3 rows"
    assert _tool_result(structured, prefer_structured=True) == '{"rows":3}'
    assert _tool_result({"content": [], "structuredContent": {"rows": 3}}, prefer_structured=False) == '{"rows":3}'
    assert _tool_result({"content": []}, prefer_structured=False) == ""
