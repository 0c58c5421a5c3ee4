"""Tool calls through the engine: dispatch, concurrency, errors the model sees, failures."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, EnvDefinitionError, ListDataset, RolloutFailure, ToolError, tool_error_ids


def tool(name: str, **properties: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in properties.items()},
            },
        },
    }


TOOLS = [
    tool("add", a="number", b="number"),
    tool("meet", n="integer"),
    tool("soft_fail", why="string"),
    tool("hard_fail"),
    tool("crash"),
    tool("own_timeout"),
    tool("sleep", seconds="number"),
    tool("value", kind="string"),
]


class ToolEnv(BaseEnv):
    max_turns = 3

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, str, dict]] = []
        self.arrived = 0
        self.everyone: asyncio.Event | None = None

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return TOOLS

    async def compute_reward(self, rollout):
        return {"turns": float(len(rollout.turns))}

    async def run_tool(self, rollout_id, tool_name, **args):
        self.calls.append((rollout_id, tool_name, args))
        if tool_name == "add":
            return args["a"] + args["b"]
        if tool_name == "meet":
            # Every call waits for all n: only concurrent dispatch can get past this.
            if self.everyone is None:
                self.everyone = asyncio.Event()
            self.arrived += 1
            if self.arrived == args["n"]:
                self.everyone.set()
            await self.everyone.wait()
            return f"met {self.arrived}"
        if tool_name == "soft_fail":
            raise ToolError(f"no such file: {args['why']}")
        if tool_name == "hard_fail":
            raise RolloutFailure("sandbox_error", "the sandbox did not start")
        if tool_name == "crash":
            raise ValueError("boom in the tool")
        if tool_name == "own_timeout":
            raise TimeoutError("upstream took too long")
        if tool_name == "sleep":
            await asyncio.sleep(args["seconds"])
            return "slept"
        return VALUES[args["kind"]]


VALUES: dict[str, object] = {
    "text": "plain text, kept as is",
    "json": {"b": [1, 2.5, None], "a": "x"},
    "number": 3,
    "none": None,
    "parts": [
        {"type": "text", "text": "see image"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ],
    "object": object(),
}


def call(name: str, arguments: object = None, id: str | None = None) -> dict:
    result: dict = {"name": name, "arguments": arguments if arguments is not None else {}}
    if id is not None:
        result["id"] = id
    return result


def tool_messages(outcome) -> list[dict]:
    return [message for message in outcome.messages if message["role"] == "tool"]


async def run_one(make_engine, make_request, steps, env=None, config=None):
    env = env or ToolEnv()
    engine = make_engine(env, config)
    result = await engine.run_group([make_request(steps)])
    return result.outcomes[0]


class ConcurrentToolEnv(ToolEnv):
    concurrent_tool_calls = True


async def test_an_env_that_opts_in_runs_one_turns_calls_concurrently_replying_in_call_order(
    make_engine, make_request, scripted_server
):
    steps = [
        {
            "tool_calls": [
                call("sleep", {"seconds": 0.2}, id="slow"),
                call("meet", {"n": 2}, id="m1"),
                call("add", {"a": 2, "b": 3}, id="sum"),
                call("meet", {"n": 2}, id="m2"),
            ]
        },
        {"content": "done"},
    ]
    env = ConcurrentToolEnv()
    outcome = await run_one(make_engine, make_request, steps, env=env, config=EngineConfig(tool_timeout=5))
    assert outcome.termination_reason == "finished"
    replies = tool_messages(outcome)
    assert [m["tool_call_id"] for m in replies] == ["slow", "m1", "sum", "m2"]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in replies), "0.2.x's tool message keys"
    assert [m["content"] for m in replies] == ["slept", "met 2", "5", "met 2"]
    assert outcome.turns[0].tool_calls == 4
    assert outcome.turns[0].tool_seconds >= 0.19
    sent = scripted_server.requests[1]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["slow", "m1", "sum", "m2"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["slow", "m1", "sum", "m2"]


class OrderEnv(ToolEnv):
    """Records when each call starts and ends, to tell one-after-another from concurrent."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    async def run_tool(self, rollout_id, tool_name, **args):
        self.events.append(f"start {args['seconds']}")
        await asyncio.sleep(args["seconds"])
        self.events.append(f"end {args['seconds']}")
        return "slept"


async def test_by_default_one_turns_calls_run_one_after_another_as_in_0_2(make_engine, make_request):
    steps = [
        {"tool_calls": [call("sleep", {"seconds": 0.05}, id="a"), call("sleep", {"seconds": 0.01}, id="b")]},
        {"content": "done"},
    ]
    env = OrderEnv()
    outcome = await run_one(make_engine, make_request, steps, env=env)
    assert outcome.termination_reason == "finished"
    assert env.events == ["start 0.05", "end 0.05", "start 0.01", "end 0.01"]


async def test_a_call_that_ends_the_rollout_stops_the_calls_after_it(make_engine, make_request, scripted_server):
    steps = [{"tool_calls": [call("hard_fail", id="x"), call("add", {"a": 1, "b": 2}, id="y")]}]
    env = ToolEnv()
    outcome = await run_one(make_engine, make_request, steps, env=env)
    assert outcome.termination_reason == "sandbox_error"
    assert [name for _, name, _ in env.calls] == ["hard_fail"]
    assert outcome.turns[0].tool_errors == ("x",)


@pytest.mark.parametrize(
    ("bad_call", "says"),
    [
        (call("delete_everything"), "Unknown tool: delete_everything"),
        (call("add", "{not json"), "Invalid JSON tool arguments: "),
        (call("add", "[1, 2]"), "Tool arguments must be a JSON object."),
        (call("add", '"text"'), "Tool arguments must be a JSON object."),
        (call("add", {"rollout_id": "x"}), "error: argument names ['rollout_id'] are reserved"),
    ],
)
async def test_a_malformed_call_gets_an_error_tool_message_and_the_rollout_continues(
    make_engine, make_request, scripted_server, bad_call, says
):
    steps = [
        {"tool_calls": [{**bad_call, "id": "bad"}, call("add", {"a": 1, "b": 1}, id="good")]},
        {"content": "recovered"},
    ]
    env = ToolEnv()
    outcome = await run_one(make_engine, make_request, steps, env=env)
    assert outcome.termination_reason == "finished"
    assert outcome.rewards == {"turns": 2.0}
    bad, good = tool_messages(outcome)
    assert bad["content"].startswith(says)
    assert good["content"] == "2"
    assert outcome.turns[0].tool_errors == ("bad",), "the error is recorded in the turn, not in the text"
    assert tool_error_ids(outcome.turns) == {"bad"}
    assert [name for _, name, _ in env.calls] == ["add"]
    assert outcome.messages[-1] == {"role": "assistant", "content": "recovered"}
    assert scripted_server.requests[1]["messages"][2]["content"].startswith(says)


async def test_tool_error_goes_back_to_the_model_as_the_result(make_engine, make_request):
    steps = [{"tool_calls": [call("soft_fail", {"why": "/tmp/x"})]}, {"content": "ok"}]
    outcome = await run_one(make_engine, make_request, steps)
    assert outcome.termination_reason == "finished"
    assert tool_messages(outcome)[0]["content"] == "error: no such file: /tmp/x"
    assert outcome.error is None


async def test_rollout_failure_in_a_tool_ends_the_rollout_with_its_reason_and_no_rewards(
    make_engine, make_request, scripted_server
):
    steps = [{"tool_calls": [call("hard_fail")]}, {"content": "never asked"}]
    outcome = await run_one(make_engine, make_request, steps)
    assert outcome.termination_reason == "sandbox_error"
    assert outcome.error == "the sandbox did not start"
    assert outcome.rewards == {}
    assert len(scripted_server.requests) == 1


async def test_any_other_tool_exception_ends_with_tool_error_and_its_traceback_is_logged(
    make_engine, make_request, scripted_server
):
    steps = [{"tool_calls": [call("crash")]}, {"content": "never asked"}]
    outcome = await run_one(make_engine, make_request, steps)
    assert outcome.termination_reason == "tool_error"
    assert "ValueError: boom in the tool" in outcome.error
    assert outcome.rewards == {}
    (entry,) = [e for e in outcome.logs if e.level == "ERROR"]
    assert entry.phase == "tools"
    assert "Traceback" in entry.traceback
    assert "ValueError: boom in the tool" in entry.traceback
    assert len(scripted_server.requests) == 1


async def test_a_timeout_error_raised_by_the_tool_itself_is_a_tool_error(make_engine, make_request):
    steps = [{"tool_calls": [call("own_timeout")]}]
    outcome = await run_one(make_engine, make_request, steps, config=EngineConfig(tool_timeout=None))
    assert outcome.termination_reason == "tool_error"
    assert "TimeoutError: upstream took too long" in outcome.error


async def test_a_tool_past_its_time_limit_ends_the_rollout_as_timeout(make_engine, make_request):
    steps = [{"tool_calls": [call("sleep", {"seconds": 5})]}, {"content": "never"}]
    clock = asyncio.get_running_loop().time()
    outcome = await run_one(make_engine, make_request, steps, config=EngineConfig(tool_timeout=0.2))
    assert asyncio.get_running_loop().time() - clock < 3
    assert outcome.termination_reason == "timeout"
    assert outcome.error == "tool call 'sleep' ran past its 0.2s limit"
    assert outcome.rewards == {}


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("text", "plain text, kept as is"),
        ("json", '{"b":[1,2.5,null],"a":"x"}'),
        ("number", "3"),
        ("none", ""),
        ("parts", VALUES["parts"]),
    ],
)
async def test_tool_results_are_serialised_for_the_model(make_engine, make_request, scripted_server, kind, content):
    steps = [{"tool_calls": [call("value", {"kind": kind})]}, {"content": "ok"}]
    outcome = await run_one(make_engine, make_request, steps)
    assert tool_messages(outcome)[0]["content"] == content
    assert scripted_server.requests[1]["messages"][2]["content"] == content


async def test_a_non_json_tool_result_is_sent_as_its_text(make_engine, make_request):
    steps = [{"tool_calls": [call("value", {"kind": "object"})]}, {"content": "ok"}]
    outcome = await run_one(make_engine, make_request, steps)
    assert tool_messages(outcome)[0]["content"].startswith("<object object at")


async def test_long_tool_results_are_truncated_and_marked(make_engine, make_request):
    steps = [{"tool_calls": [call("value", {"kind": "text"})]}, {"content": "ok"}]
    outcome = await run_one(make_engine, make_request, steps, config=EngineConfig(max_tool_result_chars=5))
    assert tool_messages(outcome)[0]["content"] == "plain…[truncated 17 chars]"


async def test_invalid_tool_schemas_are_rejected_at_start_naming_the_tool(make_engine, make_request, scripted_server):
    class BadSchema(ToolEnv):
        async def list_tools(self):
            broken = tool("search", q="string")
            broken["function"]["parameters"]["properties"]["q"]["type"] = "strnig"
            return [tool("add", a="number"), broken]

    engine = make_engine(BadSchema())
    with pytest.raises(EnvDefinitionError, match=r"list_tools\(\)\[1\] \('search'\): invalid JSON Schema"):
        await engine.run_group([make_request([{"content": "x"}])])
    assert scripted_server.requests == []


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ([{"type": "function"}], "missing the 'function' object"),
        ([{"type": "retrieval", "function": {"name": "x"}}], "'type' must be 'function'"),
        ([{"type": "function", "function": {"name": "has space"}}], "function.name must match"),
        ([tool("a"), tool("a")], r"\('a'\): duplicate tool name"),
        (
            [{"type": "function", "function": {"name": "arr", "parameters": {"type": "array"}}}],
            "must describe an object",
        ),
    ],
)
async def test_each_kind_of_bad_tool_declaration_gets_a_clear_error(make_engine, tools, says):
    class Declares(ToolEnv):
        async def list_tools(self):
            return tools

    with pytest.raises(EnvDefinitionError, match=says):
        await make_engine(Declares()).start()


async def test_tools_are_sent_to_the_server_with_every_request(make_engine, make_request, scripted_server):
    steps = [{"tool_calls": [call("add", {"a": 1, "b": 2})]}, {"content": "3"}]
    await run_one(make_engine, make_request, steps)
    for body in scripted_server.requests:
        assert [t["function"]["name"] for t in body["tools"]] == [t["function"]["name"] for t in TOOLS]
    assistant = scripted_server.requests[1]["messages"][1]
    assert assistant["content"] is None, "a turn with tool calls keeps content None, as the model sent it (0.2.x)"
    assert orjson.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 1, "b": 2}
