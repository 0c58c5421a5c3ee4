"""A scripted student that gets every question wrong once, then right after the feedback, for tests.

It answers the negated result first (so the grader's "wrong sign" feedback is exercised) and
the right one once told. ``solver(examples)`` returns the callable that
``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example


def solver(examples: Iterable[Example]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    answers = {
        next(m["content"] for m in example.payload["prompt_messages"] if m["role"] == "user"): example.payload["answer"]
        for example in examples
    }

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        question = next(m["content"] for m in messages if m["role"] == "user")
        answer = answers[question]
        told = any(m["role"] == "user" and "wrong sign" in str(m.get("content")) for m in messages)
        return {"content": f"The answer is {answer if told or answer == 0 else -answer}"}

    return policy
