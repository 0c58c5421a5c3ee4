"""An OpenEnv-style client drives a served benchmax env over ``/ws``.

The client speaks OpenEnv's ``EnvClient`` wire format: ``{"type": "reset" |
"step" | "state" | "close", "data": ...}`` in, ``{"type": "observation",
"data": {"observation", "reward", "done"}}`` (or ``state``/``error``) out. One
WebSocket is one episode (one benchmax session); a dropped socket ends it.
"""

from __future__ import annotations

import json

import aiohttp
from serve_support import events, mixed_rows, wait_until


async def _send(socket, kind, data=None):
    await socket.send_str(json.dumps({"type": kind, "data": data or {}}))
    return json.loads((await socket.receive()).data)


async def test_an_episode_resets_to_an_example_calls_tools_and_submits_for_its_reward(serve_env):
    rows = mixed_rows()
    server = serve_env(rows)
    async with (
        aiohttp.ClientSession(headers=server.headers) as http,
        http.ws_connect(f"{server.url.replace('http', 'ws')}/ws") as socket,
    ):
        reset = await _send(socket, "reset", {"split": "eval", "index": 0, "episode_id": "ep-1"})
        assert reset["type"] == "observation" and reset["data"]["done"] is False and reset["data"]["reward"] is None
        observation = reset["data"]["observation"]
        assert observation["prompt_messages"] == rows[0]["prompt_messages"] and observation["rollout_id"] == "ep-1"
        listed = await _send(socket, "step", {"type": "list_tools"})
        assert [tool["name"] for tool in listed["data"]["observation"]["tools"]] == ["add", "lookup", "explode"]
        added = await _send(socket, "step", {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1, "b": 2}})
        assert added["data"]["observation"] == {"tool_name": "add", "result": '{"sum":3}', "error": None}
        missing = await _send(socket, "step", {"tool_name": "lookup", "arguments": {"key": "e"}})
        assert missing["data"]["observation"]["result"] == "error: no key 'e'" and missing["data"]["done"] is False
        unknown = await _send(socket, "step", {"tool_name": "nope"})
        assert unknown["data"]["observation"]["result"] == "Unknown tool: nope"
        state = await _send(socket, "state")
        assert state["type"] == "state" and state["data"]["episode_id"] == "ep-1" and state["data"]["step_count"] == 2
        submitted = await _send(socket, "step", {"type": "submit", "completion": "3"})
        assert submitted["data"]["done"] is True and submitted["data"]["reward"] == 1.0
        assert submitted["data"]["observation"]["rewards"] == {"correct": 1.0}
        assert events(server.trace) == {"enter": 1, "exit": 1}
        after = await _send(socket, "step", {"tool_name": "add", "arguments": {"a": 1, "b": 1}})
        assert after == {
            "type": "error",
            "data": {"message": "no episode is running: send reset first", "code": "SESSION_ERROR"},
        }
        bad = await _send(socket, "teleport")
        assert bad["type"] == "error" and bad["data"]["code"] == "UNKNOWN_TYPE"
        await socket.send_str(json.dumps({"type": "close"}))


async def test_a_crashing_tool_ends_the_episode_and_a_dropped_socket_exits_its_context(serve_env):
    server = serve_env(mixed_rows())
    url = f"{server.url.replace('http', 'ws')}/ws"
    async with aiohttp.ClientSession(headers=server.headers) as http:
        async with http.ws_connect(url) as socket:
            await _send(socket, "reset", {"split": "eval", "index": 2})
            crashed = await _send(socket, "step", {"tool_name": "explode", "arguments": {}})
            assert crashed["data"]["done"] is True
            assert crashed["data"]["observation"]["termination_reason"] == "tool_error"
            assert events(server.trace) == {"enter": 1, "exit": 1}
        async with http.ws_connect(url) as socket:
            await _send(socket, "reset", {"split": "eval", "index": 0})
            assert events(server.trace)["enter"] == 2
        # the socket closed without a "close" message, as a killed trainer's would
        wait_until("the dropped episode's context exited", lambda: events(server.trace)["exit"] == 2, timeout=30)
