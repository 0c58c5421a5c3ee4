"""``benchmax validate``'s check of ``tools_for``: the tool set of every sampled example.

An env that chooses tools per rollout can declare a bad schema for one row type
only; the engine would fail just those rollouts in a run. Validate resolves the
set of each example it samples (inside the example's ``rollout_context``, as the
engine does), checks each distinct set once, and names the example (its data
file and line where known) beside the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmax.engine import validate_tools
from benchmax.envs import BaseEnv, EnvDefinitionError, Example, Tool


@dataclass(slots=True)
class _Failure:
    message: str
    examples: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ToolSets:
    """What ``tools_for`` returned over the sampled examples: each valid set once, each failure once."""

    env: BaseEnv
    at: str
    """``FILE:LINE`` of the env's ``tools_for``: where a problem is reported."""
    valid: dict[bytes, tuple[Example[Any], dict[str, Tool]]] = field(default_factory=dict)
    """Each distinct valid set, with the first example that uses it (its tools are called in its context)."""
    _failures: dict[str, _Failure] = field(default_factory=dict)
    _bad: dict[bytes, str] = field(default_factory=dict)
    resolved: int = 0

    async def resolve(self, example: Example[Any], label: str) -> None:
        """``tools_for(example)``, checked; ``label`` says where the example was read."""
        name = type(self.env).__name__
        shown = f"example {example.id!r} ({label})"
        try:
            tools = await self.env.tools_for(example)
        except Exception as exc:
            self._fail(f"{name}.tools_for raised {type(exc).__name__}: {exc}", shown)
            return
        self.resolved += 1
        try:
            key = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
        except TypeError as exc:
            self._fail(f"{name}.tools_for(): not JSON-serialisable ({exc})", shown)
            return
        if key in self.valid:
            return
        problem = self._bad.get(key)
        if problem is None:
            try:
                self.valid[key] = (example, validate_tools(tools, owner=name, hook="tools_for()"))
                return
            except EnvDefinitionError as exc:
                problem = self._bad[key] = str(exc)
        self._fail(problem, shown)

    def report(self, problem: Callable[[str, str], None], notes: list[str]) -> None:
        for failure in self._failures.values():
            first, more = failure.examples[0], len(failure.examples) - 1
            where = first if not more else f"{first} and {more} more example{'s' if more > 1 else ''}"
            problem(self.at, f"{failure.message} [for {where}]")
        notes.append(
            f"tools_for: {len(self.valid)} distinct valid tool set{'' if len(self.valid) == 1 else 's'} "
            f"over {self.resolved} example{'' if self.resolved == 1 else 's'}"
        )

    def _fail(self, message: str, example: str) -> None:
        self._failures.setdefault(message, _Failure(message)).examples.append(example)
