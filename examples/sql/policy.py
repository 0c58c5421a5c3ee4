"""A scripted policy that answers every question, for tests and measured rows.

It looks at the schema (``list_tables``, ``describe``), runs the gold query
with ``query``, then answers with it in a ```` ```sql ```` block: the tool
protocol a competent model follows, with the answers read from the data.
``solver(examples)`` returns the callable ``benchmax.testing.ScriptedServer`` takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example


def solver(examples: Iterable[Example]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    gold = {_question(example.payload["prompt_messages"]): example.payload["gold_sql"] for example in examples}

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        sql = gold.get(_question(messages))
        if sql is None:
            return {"content": "I cannot answer this."}
        steps = [
            {"tool_calls": [{"name": "list_tables", "arguments": {}}]},
            {"tool_calls": [{"name": "describe", "arguments": {"table": "orders"}}]},
            {"tool_calls": [{"name": "query", "arguments": {"sql": sql}}]},
            {"content": f"```sql\n{sql}\n```"},
        ]
        turn = sum(m["role"] == "assistant" for m in messages)
        return steps[min(turn, len(steps) - 1)]

    return policy


def _question(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")
