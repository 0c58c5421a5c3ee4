"""A scripted policy that does every notes task, for tests and measured rows.

It uses the server's tools the way a competent model would — looking around
with ``list_notes``/``search_notes``/``read_note`` where the task needs it, then
writing, appending or deleting — with the steps written out per task (keyed by
a phrase of the task). ``solver(examples)`` returns the callable
``benchmax.testing.ScriptedServer`` takes; a task it does not know gets a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from benchmax.envs import Example


def _call(tool: str, **arguments: str) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def _turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(calls)}


STEPS: dict[str, list[dict[str, Any]]] = {
    "groceries.md": [_turn(_call("write_note", name="groceries.md", content="milk\neggs\nbread\n"))],
    "water the plants": [_turn(_call("append_to_note", name="todo.md", line="water the plants"))],
    "old-ideas.md": [_turn(_call("delete_note", name="old-ideas.md"))],
    "records a decision": [
        _turn(_call("search_notes", text="decision:")),
        _turn(_call("write_note", name="decision.md", content="ship on Friday")),
    ],
    "index.md": [
        _turn(_call("list_notes")),
        _turn(_call("write_note", name="index.md", content="books.md\nfilms.md\nmusic.md\n")),
    ],
    "pancakes.md": [
        _turn(_call("read_note", name="recipe.md")),
        _turn(_call("write_note", name="pancakes.md", content="Pancakes\nflour\nmilk\neggs\n")),
        _turn(_call("delete_note", name="recipe.md")),
    ],
    "reading.md": [_turn(_call("write_note", name="reading.md", content="- Dune\n- Emma\n"))],
    "slept well": [_turn(_call("append_to_note", name="journal.md", line="slept well"))],
    "dentist": [
        _turn(_call("search_notes", text="dentist")),
        _turn(_call("write_note", name="answer.md", content="health.md\n")),
    ],
    "draft.md": [
        _turn(_call("delete_note", name="draft.md"), _call("append_to_note", name="final.md", line="reviewed"))
    ],
}


def solver(examples: Iterable[Example] = ()) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def policy(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        steps = next((steps for phrase, steps in STEPS.items() if phrase in task), None)
        if steps is None:
            return {"content": "I cannot do this task."}
        done = sum(m["role"] == "assistant" for m in messages)
        return steps[done] if done < len(steps) else {"content": "Done."}

    return policy
