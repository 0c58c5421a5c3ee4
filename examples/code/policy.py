"""A scripted policy that solves every task, for tests and measured rows.

It runs the task's reference solution once on the example input with
``run_python``, then answers with it in a fenced block: the tool protocol a
competent model follows, with the answers read from the data.
``solver(examples)`` returns the callable ``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example

_EXAMPLE_INPUT = re.compile(r"Example input:\n(.*?)\n\nExample output:", re.DOTALL)


def solver(examples: Iterable[Example]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    solutions = {_task(example.payload["prompt_messages"]): example.payload["solution"] for example in examples}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        task = _task(messages)
        solution = solutions.get(task)
        if solution is None:
            return {"content": "I cannot solve this."}
        if not any(m["role"] == "tool" for m in messages):
            found = _EXAMPLE_INPUT.search(task)
            stdin = found.group(1) + "\n" if found else ""
            return {"tool_calls": [{"name": "run_python", "arguments": {"code": solution, "stdin": stdin}}]}
        return {"content": f"This passes the example.\n\n```python\n{solution}\n```"}

    return policy


def _task(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")
