"""Tools chosen per rollout (``BaseEnv.tools_for``): what each request carries, what a call may reach."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from benchmax.envs import BaseEnv, Example, ListDataset, RolloutRequest, canonical_example_id, tool_error_ids

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))

from tools_for_env import CALCULATOR, RowToolsEnv


def script_line(steps: list[dict]) -> str:
    return f"#script: {orjson.dumps(steps).decode()}"


def example(kind: str, steps: list[dict], answer: str) -> Example:
    payload = {
        "prompt_messages": [{"role": "user", "content": f"{kind} row\n{script_line(steps)}"}],
        "kind": kind,
        "answer": answer,
    }
    return Example(canonical_example_id(payload), payload)


def requests_for(server, kind: str) -> list[dict]:
    return [body for body in server.requests if body["messages"][0]["content"].startswith(f"{kind} row")]


CALC_STEPS = [{"tool_calls": [{"name": "calculator", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}]
# A text row whose model calls the calculator anyway (it saw it in training, say): it must not reach it.
LEAK_STEPS = [{"tool_calls": [{"name": "calculator", "arguments": {"a": 1, "b": 1}}]}, {"content": "hello"}]


def group(server, item: Example, prefix: str, size: int = 2) -> list[RolloutRequest]:
    return [RolloutRequest(f"{prefix}{index}", item, "scripted", server.base_url) for index in range(size)]


async def test_each_row_type_sends_only_its_own_tools_and_cannot_call_the_others(make_engine, scripted_server):
    env = RowToolsEnv()
    engine = make_engine(env)
    calc = await engine.run_group(group(scripted_server, example("calculator", CALC_STEPS, "5"), "c"))
    text = await engine.run_group(group(scripted_server, example("text", LEAK_STEPS, "hello"), "t"))

    calc_bodies = requests_for(scripted_server, "calculator")
    text_bodies = requests_for(scripted_server, "text")
    assert len(calc_bodies) == 4 and len(text_bodies) == 4
    assert all(body["tools"] == [CALCULATOR] for body in calc_bodies)
    assert all("tools" not in body for body in text_bodies), "a text row's prompt carried a tool schema"

    assert [outcome.rewards for outcome in calc.outcomes] == [{"correct": 1.0}] * 2
    assert [outcome.rewards for outcome in text.outcomes] == [{"correct": 1.0}] * 2
    for outcome in text.outcomes:
        replies = [message for message in outcome.messages if message["role"] == "tool"]
        assert [reply["content"] for reply in replies] == ["Unknown tool: calculator"]
        assert tool_error_ids(outcome.turns) == {replies[0]["tool_call_id"]}
    assert sorted(rollout for rollout, _ in env.calls) == ["c0", "c1"], "only calculator rows reached run_tool"


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ("raises", "RowToolsEnv.tools_for(example '{id}') raised KeyError: 'no tool table for this row'"),
        (
            "bad_schema",
            "the tools of example '{id}' are not valid: RowToolsEnv.tools_for()[0] ('calculator'): "
            "invalid JSON Schema in function.parameters",
        ),
        (
            "not_a_list",
            "the tools of example '{id}' are not valid: RowToolsEnv.tools_for() must return a list, got dict",
        ),
    ],
)
async def test_a_failing_tools_for_fails_only_the_rollouts_of_its_examples_in_run_group(
    make_engine, scripted_server, broken, says
):
    engine = make_engine(RowToolsEnv(broken=broken))
    calc_example = example("calculator", CALC_STEPS, "5")
    calc = await engine.run_group(group(scripted_server, calc_example, "c"))
    text = await engine.run_group(group(scripted_server, example("text", [{"content": "hi"}], "hi"), "t"))

    for outcome in calc.outcomes:
        assert outcome.termination_reason == "context_error"
        assert says.format(id=calc_example.id) in (outcome.error or "")
        assert not outcome.scored
    assert requests_for(scripted_server, "calculator") == [], "no model call for a rollout without valid tools"
    assert [outcome.termination_reason for outcome in text.outcomes] == ["finished", "finished"]
    assert [outcome.rewards for outcome in text.outcomes] == [{"correct": 1.0}] * 2


async def test_the_default_is_list_tools(make_engine, make_request, scripted_server):
    """An env that does not override ``tools_for`` sends ``list_tools()`` to every rollout (0.2.x)."""

    class Plain(BaseEnv):
        max_turns = 1

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return ListDataset([])

        async def list_tools(self):
            return [CALCULATOR]

        async def compute_reward(self, rollout):
            return {"ok": 1.0}

    request = make_request([{"content": "x"}])
    assert await Plain().tools_for(request.example) == [CALCULATOR]
    outcome = (await make_engine(Plain()).run_group([request])).outcomes[0]
    assert outcome.termination_reason == "finished"
    assert scripted_server.requests[0]["tools"] == [CALCULATOR]
