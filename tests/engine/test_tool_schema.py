"""Tool arguments reach ``run_tool`` as the model sent them, unless the env opts in to schema checks."""

import pytest

from benchmax.envs import BaseEnv, ListDataset


@pytest.mark.parametrize("checked", [True, False])
async def test_schema_checks_are_an_opt_in_that_sends_mismatches_back_to_the_model(
    scripted_server, make_request, make_engine, checked
):
    seen: list[dict] = []

    class Strict(BaseEnv):
        max_turns = 2
        check_tool_arguments = checked

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return ListDataset([])

        async def list_tools(self):
            return [
                {
                    "type": "function",
                    "function": {
                        "name": "lookup",
                        "parameters": {
                            "type": "object",
                            "properties": {"key": {"type": "string"}},
                            "required": ["key"],
                        },
                    },
                }
            ]

        async def run_tool(self, rollout_id, tool_name, **tool_args):
            seen.append(tool_args)
            return "found"

        async def compute_reward(self, rollout):
            return {"ok": 1.0}

    request = make_request(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {"key": 7}}, {"name": "lookup", "arguments": {}}]},
            {"content": "done"},
        ]
    )
    outcome = await make_engine(Strict()).run_rollout(request)
    tool_messages = [m["content"] for m in outcome.messages if m["role"] == "tool"]
    assert outcome.termination_reason == "finished"
    if not checked:
        assert tool_messages == ["found", "found"]
        assert seen == [{"key": 7}, {}], "0.2.x passes the arguments as the model sent them"
        return
    assert tool_messages == [
        "error: arguments do not match the schema of 'lookup' at key: 7 is not of type 'string'",
        "error: arguments do not match the schema of 'lookup' at (root): 'key' is a required property",
    ]
    assert seen == []
    assert len(outcome.turns[0].tool_errors) == 2
