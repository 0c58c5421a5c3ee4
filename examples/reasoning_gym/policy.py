"""A scripted policy that answers every generated task correctly, for tests and measured rows.

It looks the reference answer up by question text, so it shows the answer format
the reward expects, not any skill. ``solver(examples)`` returns the callable
that ``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example


def solver(examples: Iterable[Example]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    answers = {example.payload["entry"]["question"]: example.payload["entry"]["answer"] for example in examples}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        answer = answers.get(question)
        if answer is None:
            return {"content": "I do not know this one."}
        return {"content": f"<think>Looked it up.</think>\n<answer>{answer}</answer>"}

    return policy
