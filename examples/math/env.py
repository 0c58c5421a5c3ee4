"""Arithmetic with calculator tools: the seed's calculator env.

The model gets a word problem and four tools (add, subtract, multiply, divide);
the reward ``correct`` is 1.0 when the number in its final answer equals the
expected one. Run it with ``benchmax eval examples/math``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    Tool,
    ToolError,
    canonical_example_id,
)
from benchmax.rewards import extract_completion_text

SYSTEM_PROMPT = (
    "You solve arithmetic problems. Use the calculator tools for every operation, "
    "then reply with the final number only."
)

_OPERATIONS = {
    "add": ("Add two numbers: a + b.", lambda a, b: a + b),
    "subtract": ("Subtract b from a: a - b.", lambda a, b: a - b),
    "multiply": ("Multiply two numbers: a * b.", lambda a, b: a * b),
    "divide": ("Divide a by b: a / b.", lambda a, b: a / b),
}

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def _tool(name: str, description: str) -> Tool:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[Tool] = [_tool(name, description) for name, (description, _) in _OPERATIONS.items()]


WORKED_EXAMPLES: list[tuple[str, str, int, int]] = [
    ("What is 3 times 4?", "multiply", 3, 4),
    ("What is 20 minus 5?", "subtract", 20, 5),
    ("What is 8 plus 6?", "add", 8, 6),
]
"""Solved questions none of the splits asks: a call, its result, the answer."""


def worked_example(index: int) -> list[dict[str, Any]]:
    """One solved question as chat messages: the tool call, its result, the final number."""
    question, tool, a, b = WORKED_EXAMPLES[index]
    call_id = f"example_{index}"
    result = _tidy(_OPERATIONS[tool][1](a, b))
    return [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": tool, "arguments": f'{{"a": {a}, "b": {b}}}'}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": str(result)},
        {"role": "assistant", "content": str(result)},
    ]


def row_to_example(row: dict[str, Any], worked_examples: int = 0) -> Example:
    """``{"question", "answer"}`` rows become a system + user prompt; the answer stays as data.

    ``worked_examples`` solved questions go between the system message and the
    question, for models that do not know a tool-call format of their own.
    """
    shots = [message for index in range(worked_examples) for message in worked_example(index)]
    payload = {
        "prompt_messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            *shots,
            {"role": "user", "content": row["question"]},
        ],
        "answer": row["answer"],
    }
    return Example(canonical_example_id(payload), payload)


def final_number(text: str) -> float | None:
    """The last number in ``text`` (``1,234.5`` allowed), or ``None``."""
    found = _NUMBER.findall(text)
    return float(found[-1].replace(",", "")) if found else None


def _operand(tool_name: str, args: dict[str, Any], key: str) -> float:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"{tool_name} needs numbers 'a' and 'b'; got {key}={value!r}")
    return value


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


class MathEnv(BaseEnv):
    """``worked_examples`` (0 to 3, default 0) puts that many solved questions in every prompt."""

    max_turns = 8
    max_tool_calls = 16

    def __init__(
        self, worked_examples: int = 0, *, max_turns: int | None = None, max_tool_calls: int | None = None
    ) -> None:
        super().__init__(max_turns=max_turns, max_tool_calls=max_tool_calls)
        if not isinstance(worked_examples, int) or not 0 <= worked_examples <= len(WORKED_EXAMPLES):
            raise ValueError(
                f"worked_examples must be an integer from 0 to {len(WORKED_EXAMPLES)}, got {worked_examples!r}"
            )
        self.worked_examples = worked_examples

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(
            base_dir / f"{split}.jsonl",
            row_to_example=lambda row: row_to_example(row, self.worked_examples),
            max_examples=max_examples,
        )

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        unexpected = sorted(set(tool_args) - {"a", "b"})
        if unexpected:
            raise ToolError(f"{tool_name} takes only 'a' and 'b'; unexpected {unexpected}")
        a = _operand(tool_name, tool_args, "a")
        b = _operand(tool_name, tool_args, "b")
        if tool_name == "divide" and b == 0:
            raise ToolError("division by zero")
        result = _OPERATIONS[tool_name][1](a, b)
        if not math.isfinite(result):
            raise ToolError(f"{tool_name}({a}, {b}) is not a finite number")
        return _tidy(result)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        got = final_number(extract_completion_text(rollout.messages))
        expected = float(rollout.example_args["answer"])
        return {"correct": float(got is not None and math.isclose(got, expected, abs_tol=1e-6))}
