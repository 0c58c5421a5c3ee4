"""examples/agent_sdk and examples/agent_cli end to end against a scripted calculator-using model."""

from __future__ import annotations

import re
import time

import pytest

from benchmax.envs import RolloutRequest, TerminationReason
from benchmax.sandbox import BwrapProvider, SandboxUnavailable
from benchmax.testing import ScriptedServer

_QUESTION = re.compile(r"What is (-?[\d.]+) (plus|times) (-?[\d.]+)\?")


def calculator_policy(body: dict) -> dict:
    """Turn 0: call the tool the question needs. Turn 1: answer with the tool's result."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return {"content": f"The answer is {messages[-1]['content']}"}
    a, operation, b = _QUESTION.search(messages[-1]["content"]).groups()
    name = "add" if operation == "plus" else "multiply"
    return {"tool_calls": [{"name": name, "arguments": {"a": float(a), "b": float(b)}}]}


def _bwrap() -> bool:
    try:
        BwrapProvider().check()
    except SandboxUnavailable:
        return False
    return True


@pytest.mark.parametrize(
    "name",
    ["agent_sdk", pytest.param("agent_cli", marks=pytest.mark.skipif(not _bwrap(), reason="no bubblewrap"))],
)
async def test_the_agent_example_solves_every_task_through_the_proxy(name, load_example, example_dir, make_engine):
    env = load_example(name)()
    directory = example_dir(name)
    dataset = list(await env.create_dataset("eval", directory))
    with ScriptedServer(calculator_policy) as server:
        engine = make_engine(env)
        started = time.perf_counter()
        groups = [
            engine.run_group([RolloutRequest(f"eval-{i}-{k}", item, "scripted", server.base_url) for k in range(2)])
            for i, item in enumerate(dataset)
        ]
        import asyncio

        results = await asyncio.gather(*groups)
        seconds = time.perf_counter() - started
        await env.aclose()
    outcomes = [outcome for result in results for outcome in result.outcomes]
    print(f"\n{name}: {len(outcomes)} rollouts in {seconds:.2f}s = {len(outcomes) / seconds:.1f} rollouts/s")
    assert len(outcomes) == 2 * len(dataset) == 8
    for outcome in outcomes:
        assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
        assert outcome.rewards == {"correct": 1.0}
        assert [turn.tool_calls for turn in outcome.turns] == [1, 0]
    if name == "agent_cli":
        assert any("multiply" in entry.message for outcome in outcomes for entry in outcome.logs)
