"""examples/math runs end to end against a scripted calculator-using model."""

from __future__ import annotations

import re

import orjson
import pytest

from benchmax.envs import EnvDefinitionError, RolloutRequest
from benchmax.testing import ScriptedServer

_QUESTION = re.compile(r"What is (-?[\d.]+) (plus|minus|times|divided by) (-?[\d.]+)\?")
_TOOL = {"plus": "add", "minus": "subtract", "times": "multiply", "divided by": "divide"}


def calculator_policy(body: dict) -> dict:
    """Turn 0: call the tool the question needs. Turn 1: answer with the tool's result."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return {"content": f"The answer is {messages[-1]['content']}"}
    match = _QUESTION.search(messages[-1]["content"])
    assert match, messages[-1]["content"]
    a, operation, b = match.groups()
    return {"tool_calls": [{"name": _TOOL[operation], "arguments": {"a": float(a), "b": float(b)}}]}


async def run_split(env, directory, split, server, make_engine):
    dataset = await env.create_dataset(split, directory)
    engine = make_engine(env)
    outcomes = []
    for index, example in enumerate(dataset):
        request = RolloutRequest(f"{split}-{index}", example, "scripted", server.base_url)
        outcomes.extend((await engine.run_group([request])).outcomes)
    return dataset, outcomes


def test_the_examples_directory_loads_as_one_env_class(load_example):
    cls = load_example("math")
    assert cls.__name__ == "MathEnv"
    assert cls.max_turns >= 2


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_the_shipped_data_loads_with_system_and_user_prompts(load_example, example_dir, split):
    env = load_example("math")()
    dataset = await env.create_dataset(split, example_dir("math"))
    assert len(dataset) >= 4
    for example in dataset:
        roles = [message["role"] for message in example.payload["prompt_messages"]]
        assert roles == ["system", "user"]
        assert isinstance(example.payload["answer"], int | float)


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_uses_the_calculator_scores_every_example(load_example, example_dir, make_engine, split):
    env = load_example("math")()
    with ScriptedServer(calculator_policy) as server:
        dataset, outcomes = await run_split(env, example_dir("math"), split, server, make_engine)
        tools_sent = server.requests[0]["tools"]
    assert sorted(t["function"]["name"] for t in tools_sent) == [
        "add",
        "divide",
        "multiply",
        "subtract",
    ]
    assert len(outcomes) == len(dataset)
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"correct": 1.0}, outcome.messages
        assert [m["role"] for m in outcome.messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
        ]


async def test_a_wrong_final_number_scores_zero(load_example, example_dir, make_engine):
    env = load_example("math")()
    with ScriptedServer(lambda body: {"content": "I think it is 7"}) as server:
        _, outcomes = await run_split(env, example_dir("math"), "eval", server, make_engine)
    assert {o.termination_reason for o in outcomes} == {"finished"}
    assert [o.rewards["correct"] for o in outcomes] == [0.0] * len(outcomes)


def _division_then_answer(body: dict) -> dict:
    last = body["messages"][-1]
    if last["role"] != "tool":
        return {
            "tool_calls": [
                {"name": "divide", "arguments": {"a": 1, "b": 0}, "id": "zero"},
                {"name": "multiply", "arguments": {"a": "x", "b": 2}, "id": "text"},
                {"name": "add", "arguments": {"a": 1, "b": 2, "c": 3}, "id": "extra"},
                {"name": "divide", "arguments": {"a": 7, "b": 2}, "id": "ok"},
            ]
        }
    return {"content": "3.5"}


async def test_bad_tool_calls_come_back_as_errors_and_the_model_can_go_on(load_example, example_dir, make_engine):
    env = load_example("math")()
    with ScriptedServer(_division_then_answer) as server:
        _, outcomes = await run_split(env, example_dir("math"), "eval", server, make_engine)
    outcome = next(o for o in outcomes if "7 divided by 2" in o.messages[1]["content"])
    results = {m["tool_call_id"]: m["content"] for m in outcome.messages if m["role"] == "tool"}
    assert results == {
        "zero": "error: division by zero",
        # The env checks its own arguments (as 0.2.x envs do); benchmax's schema checks are opt-in.
        "text": "error: multiply needs numbers 'a' and 'b'; got a='x'",
        "extra": "error: add takes only 'a' and 'b'; unexpected ['c']",
        "ok": "3.5",
    }
    assert outcome.rewards == {"correct": 1.0}


async def test_tool_results_are_plain_numbers(load_example):
    env = load_example("math")()
    assert await env.run_tool("r", "multiply", a=2.5, b=4) == 10
    assert orjson.dumps(await env.run_tool("r", "divide", a=81, b=4)) == b"20.25"
    assert await env.run_tool("r", "subtract", a=50, b=75) == -25


def test_the_env_rejects_an_unusable_limit(load_example):
    with pytest.raises(EnvDefinitionError, match="max_turns"):
        load_example("math")(max_turns=0)
