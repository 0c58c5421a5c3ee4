"""An agent written with the plain ``openai`` SDK (an async function with a tool loop), run as an env.

benchmax gives the agent a base URL and key of its recording proxy; the agent runs
its own loop (the calculator tools are its own code, not the env's), and the calls
it makes become the rollout. Run it with ``benchmax eval examples/agent_sdk``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import openai

from benchmax.agents import AgentEnv
from benchmax.envs import BaseRollout, DatasetSplit, JsonlDataset
from benchmax.rewards import extract_completion_text

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }
    for name in ("add", "multiply")
]
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def run_tool(name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments)
        a, b = float(args["a"]), float(args["b"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"error: {exc}"
    value = a + b if name == "add" else a * b if name == "multiply" else None
    return "error: unknown tool" if value is None else f"{value:g}"


async def calculator_agent(example: dict[str, Any], base_url: str, api_key: str) -> str:
    """The agent as its author wrote it: any OpenAI-compatible endpoint, its own tools, its own loop."""
    messages: list[dict[str, Any]] = list(example["prompt_messages"])
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, http_client=httpx.AsyncClient(trust_env=False)
    ) as client:
        for _ in range(6):
            reply = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = run_tool(call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""


class AgentSdkEnv(AgentEnv):
    agent = staticmethod(calculator_agent)
    max_calls = 8

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        numbers = _NUMBER.findall(extract_completion_text(rollout.messages))
        return {"correct": float(bool(numbers) and float(numbers[-1]) == float(rollout.example_args["answer"]))}
