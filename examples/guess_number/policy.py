"""A scripted player that finds every number by binary search, for tests and measured rows.

It reads the range from the prompt and the hints from the env's answers, so it shows
the reply format the env expects. ``solver(examples)`` returns the callable that
``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example

_RANGE = re.compile(r"between (-?\d+) and (-?\d+)")
_HINT = re.compile(r"(-?\d+) is wrong: the number is (higher|lower)")


def solver(examples: Iterable[Example] = ()) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        prompt = next(message["content"] for message in messages if message["role"] == "user")
        low, high = (int(value) for value in _RANGE.search(prompt).groups())
        for message in messages:
            hint = _HINT.search(str(message.get("content") or "")) if message["role"] == "user" else None
            if hint:
                guess = int(hint.group(1))
                low, high = (guess + 1, high) if hint.group(2) == "higher" else (low, guess - 1)
        return {"content": str((low + high) // 2)}

    return policy
