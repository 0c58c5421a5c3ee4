"""A scripted policy that fixes every task the way a careful engineer would.

It runs the tests, reads the module, writes the reference fix, runs the tests
again, then answers: four tool calls over four turns, the answers read from the
data. ``solver(examples)`` returns the callable ``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example

TEST_COMMAND = "python -m unittest discover -s tests 2>&1 | tail -n 3"


def solver(examples: Iterable[Example]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    fixes = {_issue(example.payload["prompt_messages"]): example.payload["solution"] for example in examples}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        fix = fixes.get(_issue(messages))
        if fix is None:
            return {"content": "I cannot fix this."}
        ((module, content),) = fix.items()
        steps = [
            {"name": "shell", "arguments": {"command": TEST_COMMAND}},
            {"name": "read_file", "arguments": {"path": module}},
            {"name": "write_file", "arguments": {"path": module, "content": content}},
            {"name": "shell", "arguments": {"command": TEST_COMMAND}},
        ]
        turn = sum(message["role"] == "assistant" for message in messages)
        if turn < len(steps):
            return {"tool_calls": [steps[turn]]}
        return {"content": f"Fixed the bug in {module}; the tests pass."}

    return policy


def _issue(messages: list[dict[str, Any]]) -> str:
    return next(message["content"] for message in messages if message["role"] == "user")
