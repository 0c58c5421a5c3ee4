"""Tool arguments are checked against the tool's declared JSON Schema before env code runs."""

from benchmax.envs import BaseEnv, ListDataset


async def test_arguments_that_break_the_declared_schema_go_back_to_the_model_and_never_reach_run_tool(
    scripted_server, make_request, make_engine
):
    seen: list[dict] = []

    class Strict(BaseEnv):
        max_turns = 2

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
    assert tool_messages == [
        "error: arguments do not match the schema of 'lookup' at key: 7 is not of type 'string'",
        "error: arguments do not match the schema of 'lookup' at (root): 'key' is a required property",
    ]
    assert seen == []
    assert outcome.termination_reason == "finished"
