"""The multi-turn tool env the training tests run (importable by spec path too)."""

from __future__ import annotations

from contextlib import asynccontextmanager

from benchmax.envs import BaseEnv, ListDataset, ToolError
from benchmax.rewards import extract_completion_text


class CalculatorEnv(BaseEnv):
    """A multi-turn tool env: ``add`` answers, anything else is a tool error.

    Rewards: ``short`` for every scored rollout; ``used_tool`` only when a tool ran
    (a conditional component, zero-filled elsewhere). Examples flagged ``broken``
    fail in ``rollout_context``: an operational failure.
    """

    max_turns = 3

    def __init__(self, *, broken: bool = False) -> None:
        super().__init__()
        self.broken = broken

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [
            {"prompt_messages": [{"role": "user", "content": f"what is two plus {word}"}], "n": index}
            for index, word in enumerate(["three", "five", "seven", "two"])
        ]
        if self.broken:
            rows[1]["broken"] = True
        return ListDataset(rows[:max_examples] if max_examples else rows)

    async def list_tools(self):
        return [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "add numbers",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        if tool_name == "add":
            return "result five"
        raise ToolError(f"no tool named {tool_name!r}")

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if example.payload.get("broken"):
            raise RuntimeError("the sandbox would not start")
        yield

    async def compute_reward(self, rollout):
        text = extract_completion_text(rollout.messages)
        rewards = {"short": 1.0 / (1 + len(text.split()))}
        if any(message["role"] == "tool" for message in rollout.messages):
            rewards["used_tool"] = 1.0
        return rewards


def calculator_bridge(policy, tokenizer, *, group_size: int = 4, max_tokens: int = 10):
    """A ``RolloutBridge`` over this env whose engine asks ``policy``, and one
    batch of prompts: every example ``group_size`` times."""
    import asyncio
    from pathlib import Path

    from benchmax.engine import Engine
    from benchmax.envs import SamplingParams
    from benchmax.train import POLICY_URL
    from benchmax.train._rollouts import RolloutBridge

    env = CalculatorEnv()
    engine = Engine(env)
    engine.clients.register(POLICY_URL, policy)
    dataset = asyncio.run(env.create_dataset("train", Path(".")))
    bridge = RolloutBridge(
        engine=engine,
        examples={example.id: example for example in dataset},
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens),
        policy=policy,
    )
    return bridge, [example.id for example in dataset for _ in range(group_size)]
