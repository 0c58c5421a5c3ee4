"""An env with two row types: calculator rows get a calculator tool, text rows none.

``broken`` makes ``tools_for`` fail for calculator rows in one of three ways
(``raises``, ``bad_schema``, ``not_a_list``), so where each failure surfaces can be
checked: text rows must go on unharmed.
"""

from __future__ import annotations

from benchmax.envs import BaseEnv, JsonlDataset, ToolError
from benchmax.rewards import extract_completion_text

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "add two numbers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
BROKEN_SCHEMA = {
    "type": "function",
    "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"a": {"type": "numbr"}}}},
}


class RowToolsEnv(BaseEnv):
    max_turns = 3

    def __init__(self, broken: str | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.broken = broken
        self.calls: list[tuple[str, str]] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def tools_for(self, example):
        if example.payload.get("kind") != "calculator":
            return []
        if self.broken == "raises":
            raise KeyError("no tool table for this row")
        if self.broken == "bad_schema":
            return [BROKEN_SCHEMA]
        if self.broken == "not_a_list":
            return CALCULATOR
        return [CALCULATOR]

    async def run_tool(self, rollout_id, tool_name, **args):
        self.calls.append((rollout_id, tool_name))
        if tool_name != "calculator":
            raise ToolError(f"no tool {tool_name}")
        return args["a"] + args["b"]

    async def compute_reward(self, rollout):
        answer = extract_completion_text(rollout.messages)
        return {"correct": float(answer.strip() == str(rollout.example_args["answer"]))}
