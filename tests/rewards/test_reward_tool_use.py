import pytest

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
        {"role": "assistant", "content": "", "tool_calls": [_call("a", "search"), _call("b", "fetch")]},
        {"role": "tool", "tool_call_id": "a", "name": "search", "content": "3 hits"},
        {"role": "tool", "tool_call_id": "b", "name": "fetch", "content": "error: page not found"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c", "search", '{"q": "x"}')]},
        {"role": "tool", "tool_call_id": "c", "name": "search", "content": [{"type": "text", "text": "1 hit"}]},
        {"role": "assistant", "content": "done"},
    ]


def test_tool_calls_pair_each_call_with_its_result():
    records = tool_calls(_transcript())
    assert [(r.id, r.name, r.result, r.error) for r in records] == [
        ("a", "search", "3 hits", False),
        ("b", "fetch", "error: page not found", True),
        ("c", "search", "1 hit", False),
    ]
    assert records[2].arguments == '{"q": "x"}'


def test_tool_call_counts_per_tool():
    assert tool_call_counts(_transcript()) == {"search": 2, "fetch": 1}
    assert tool_call_counts([{"role": "user", "content": "x"}]) == {}


def test_tool_errors_counts_results_starting_with_error():
    assert tool_errors(_transcript()) == 1


def test_tool_efficiency_is_full_within_budget_then_budget_over_calls():
    assert tool_efficiency(_transcript(), 3) == 1.0
    assert tool_efficiency(_transcript(), 2) == pytest.approx(2 / 3)
    assert tool_efficiency(_transcript(), 0) == 0.0
    with pytest.raises(ValueError):
        tool_efficiency(_transcript(), -1)


def test_called_tool_can_require_a_successful_result():
    messages = _transcript()
    assert called_tool(messages, "fetch") == 1.0
    assert called_tool(messages, "fetch", successfully=True) == 0.0
    assert called_tool(messages, "search", successfully=True) == 1.0
    assert called_tool(messages, "delete") == 0.0


def test_a_call_without_a_result_is_not_a_success():
    messages = [{"role": "assistant", "content": "", "tool_calls": [_call("z", "fetch")]}]
    assert tool_calls(messages)[0].result is None
    assert called_tool(messages, "fetch", successfully=True) == 0.0


def test_tool_use_rewards_builds_a_reward_dict():
    rewards = tool_use_rewards(_transcript(), budget=2, required=["search", "fetch"])
    assert rewards == {
        "tools_efficiency": pytest.approx(2 / 3),
        "tools_required": 0.5,
        "tools_errors": 1.0,
    }
    assert tool_use_rewards(_transcript(), prefix="t") == {"t_errors": 1.0}
