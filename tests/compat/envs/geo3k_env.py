"""A geometry tool env in the style of benchmax 0.2's ``examples/geo3k/main.py``.

The prompt carries the figure as an image content part; ``zoom`` answers with
image content parts (a crop) and a caption, ``measure`` with a JSON object.
Per-rollout tool statistics feed the reward, so how tools were dispatched
shows in the scores.
"""

import asyncio
import re
from pathlib import Path
from typing import Any

from images import data_url

from benchmax.envs import canonical_example_id
from benchmax.envs.base import BaseEnv, BaseRollout, JsonlDataset, JsonRow, Tool
from benchmax.envs.shared_types import DatasetSplit, Example
from benchmax.rewards import extract_completion_text

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "zoom",
            "description": "Zoom into a region of the figure.",
            "parameters": {
                "type": "object",
                "properties": {"region": {"type": "string"}, "factor": {"type": "integer"}},
                "required": ["region"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "measure",
            "description": "Measure a segment's length.",
            "parameters": {
                "type": "object",
                "properties": {"segment": {"type": "string"}},
                "required": ["segment"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "hint",
            "description": "Ask for a hint (not implemented by this env).",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

_BOXED = re.compile(r"\\boxed\{([^}]*)\}")


def row_to_example(row: JsonRow) -> Example[JsonRow]:
    payload: JsonRow = {
        "prompt_messages": [
            {"role": "system", "content": row["script"]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": row["question"]},
                    {"type": "image_url", "image_url": {"url": data_url(row.get("color", "blue"))}},
                ],
            },
        ],
        "answer": str(row["answer"]),
    }
    return Example(id=canonical_example_id(payload), payload=payload)


class Geo3kDataset(JsonlDataset[JsonRow]):
    def __init__(self, path: Path, *, max_examples: int | None = None) -> None:
        super().__init__(path, row_to_example=row_to_example, max_examples=max_examples)


class Geo3kEnv(BaseEnv):
    max_turns = 4
    max_tool_calls = 3

    def __init__(self) -> None:
        super().__init__()
        self.stats: dict[str, dict[str, int]] = {}

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Geo3kDataset:
        return Geo3kDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        stats = self.stats.setdefault(rollout_id, {"zooms": 0, "active": 0, "most_active": 0})
        if tool_name == "zoom":
            stats["zooms"] += 1
            factor = tool_args.get("factor", 2)
            return [
                {"type": "image_url", "image_url": {"url": data_url("yellow", 2)}},
                {"type": "text", "text": f"zoomed into {tool_args['region']} x{factor}"},
            ]
        if tool_name == "measure":
            if tool_args.get("segment") == "explode":
                raise RuntimeError("the ruler broke")
            stats["active"] += 1
            stats["most_active"] = max(stats["most_active"], stats["active"])
            await asyncio.sleep(0.05)
            stats["active"] -= 1
            return {"segment": tool_args.get("segment"), "length": 5}
        return await super().run_tool(rollout_id, tool_name, **tool_args)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        boxed = _BOXED.findall(text)
        stats = self.stats.get(rollout.rollout_id, {"zooms": 0, "most_active": 0})
        return {
            "correct": float(bool(boxed) and boxed[-1].strip() == rollout.example_args["answer"]),
            "tool_results": float(sum(1 for message in rollout.messages if message["role"] == "tool")),
            "zooms": float(stats["zooms"]),
            "overlapping_calls": float(stats["most_active"] > 1),
        }
