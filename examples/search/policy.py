"""A scripted policy that searches, reads and answers with citations, for tests and measured rows.

It searches with the question, opens the top hits, and answers with the gold
answer, citing the opened documents that contain it: the tool protocol a
competent model follows, with the answers read from the data.
``solver(examples)`` returns the callable ``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example

_WORD = re.compile(r"[a-z0-9]+")


def solver(examples: Iterable[Example], *, k: int = 3) -> Callable[[dict[str, Any]], dict[str, Any]]:
    answers = {_question(example.payload["prompt_messages"]): example.payload["answer"] for example in examples}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        question = _question(messages)
        answer = answers.get(question)
        if answer is None:
            return {"content": "<answer>unknown</answer>"}
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [{"name": "search", "arguments": {"query": question, "k": k}}]}
        if len(results) == 1:
            calls = [{"id": f"open_{hit['id']}", "name": "open", "arguments": {"id": hit["id"]}} for hit in results[0]]
            return {"tool_calls": calls} if calls else {"content": f"<answer>{answer}</answer>"}
        cites = "".join(f"<cite>{doc['id']}</cite>" for doc in results[1:] if _contains(doc["text"], answer))
        return {"content": f"<answer>{answer}</answer>\n{cites}"}

    return policy


def _question(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def _contains(text: str, answer: str) -> bool:
    want, got = _WORD.findall(answer.lower()), _WORD.findall(text.lower())
    return any(got[i : i + len(want)] == want for i in range(len(got) - len(want) + 1))
