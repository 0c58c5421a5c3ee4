"""An env both the gate and the router tests drive: one tool call, then an answer (two model turns)."""

from __future__ import annotations

from benchmax.envs import BaseEnv, ListDataset


class ToolThenAnswerEnv(BaseEnv):
    """Each rollout calls one tool, then answers: two model turns, the second holding the first."""

    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        return "pong"

    async def compute_reward(self, rollout):
        tools = sum(message["role"] == "tool" for message in rollout.messages)
        assistants = sum(message["role"] == "assistant" for message in rollout.messages)
        return {"one_tool_two_turns": float(tools == 1 and assistants == 2)}
