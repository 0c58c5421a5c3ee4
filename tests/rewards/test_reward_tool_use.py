"""Tool-use rewards read calls from the transcript and errors from the engine's turn records."""

import pytest

from benchmax.envs import BaseRollout, TurnRecord
from benchmax.rewards import (
    called_tool,
    tool_call_counts,
    tool_calls,
    tool_efficiency,
    tool_errors,
    tool_use_rewards,
)


def _call(call_id, name, arguments="{}"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _transcript():
    return [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "search"), _call("b", "fetch")]},
        {"role": "tool", "tool_call_id": "a", "content": "3 hits"},
        {"role": "tool", "tool_call_id": "b", "content": "error: page not found"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c", "search", '{"q": "x"}')]},
        # A tool may answer with text that starts with "error": only the engine's record says it failed.
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "error rates: 1 hit"}]},
        {"role": "assistant", "content": "done"},
    ]


def _rollout():
    """The transcript above, with the engine's record of which tool call came back as an error."""
    turns = (
        TurnRecord(index=0, started_at=0.0, model_seconds=0.1, tool_calls=2, tool_errors=("b",)),
        TurnRecord(index=1, started_at=0.2, model_seconds=0.1, tool_calls=1),
        TurnRecord(index=2, started_at=0.4, model_seconds=0.1),
    )
    return BaseRollout(
        rollout_id="r", termination_reason="finished", messages=_transcript(), example_args={}, turns=turns
    )


def test_tool_calls_pair_each_call_with_its_result_and_the_engines_error_record():
    records = tool_calls(_rollout())
    assert [(r.id, r.name, r.result, r.error) for r in records] == [
        ("a", "search", "3 hits", False),
        ("b", "fetch", "error: page not found", True),
        ("c", "search", "error rates: 1 hit", False),
    ]
    assert records[2].arguments == '{"q": "x"}'


def test_stored_turns_serve_as_the_record_too():
    stored = [{"index": 0, "tool_errors": ["b"]}, {"index": 1}]
    assert tool_errors(_transcript(), turns=stored) == 1


def test_tool_call_counts_per_tool():
    assert tool_call_counts(_rollout()) == {"search": 2, "fetch": 1}
    assert tool_call_counts([{"role": "user", "content": "x"}]) == {}


def test_tool_errors_counts_the_calls_the_engine_recorded_as_errors():
    assert tool_errors(_rollout()) == 1


def test_asking_for_errors_of_bare_messages_says_to_pass_the_rollout():
    with pytest.raises(TypeError, match="pass the rollout"):
        tool_errors(_transcript())
    with pytest.raises(TypeError, match="pass the rollout"):
        called_tool(_transcript(), "fetch", successfully=True)


def test_tool_efficiency_is_full_within_budget_then_budget_over_calls():
    assert tool_efficiency(_rollout(), 3) == 1.0
    assert tool_efficiency(_rollout(), 2) == pytest.approx(2 / 3)
    assert tool_efficiency(_transcript(), 0) == 0.0
    with pytest.raises(ValueError):
        tool_efficiency(_rollout(), -1)


def test_called_tool_can_require_a_successful_result():
    rollout = _rollout()
    assert called_tool(rollout, "fetch") == 1.0
    assert called_tool(rollout, "fetch", successfully=True) == 0.0
    assert called_tool(rollout, "search", successfully=True) == 1.0
    assert called_tool(rollout, "delete") == 0.0


def test_a_call_without_a_result_is_not_a_success():
    messages = [{"role": "assistant", "content": None, "tool_calls": [_call("z", "fetch")]}]
    assert tool_calls(messages)[0].result is None
    assert called_tool(messages, "fetch", successfully=True, turns=()) == 0.0


def test_tool_use_rewards_builds_a_reward_dict():
    rewards = tool_use_rewards(_rollout(), budget=2, required=["search", "fetch"])
    assert rewards == {
        "tools_efficiency": pytest.approx(2 / 3),
        "tools_required": 0.5,
        "tools_errors": 1.0,
    }
    assert tool_use_rewards(_rollout(), prefix="t") == {"t_errors": 1.0}


async def test_the_engines_record_reaches_the_reward_through_the_rollout(make_engine, make_request):
    from benchmax.envs import BaseEnv, ListDataset, ToolError

    class Tools(BaseEnv):
        max_turns = 3

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return ListDataset([])

        async def list_tools(self):
            return [{"type": "function", "function": {"name": "fetch", "parameters": {"type": "object"}}}]

        async def run_tool(self, rollout_id, tool_name, **tool_args):
            raise ToolError("page not found")

        async def compute_reward(self, rollout):
            return tool_use_rewards(rollout, required=["fetch"])

    steps = [{"tool_calls": [{"name": "fetch", "arguments": {}}, {"name": "nope", "arguments": {}}]}, {"content": "ok"}]
    outcome = await make_engine(Tools()).run_rollout(make_request(steps))
    assert outcome.rewards == {"tools_required": 0.0, "tools_errors": 2.0}
