"""The vocabulary shared by environments, the engine and every face.

Messages and tools are plain OpenAI chat-format dicts on purpose: env authors
already know that format, every model server speaks it, and it serialises
straight into the run store without an adapter layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

DatasetSplit: TypeAlias = Literal["train", "eval"]
"""Which traffic an example serves: training rollouts or evaluation."""

Message: TypeAlias = dict[str, Any]
"""One OpenAI chat message: ``{"role": ..., "content": ...}`` plus tool fields."""

Messages: TypeAlias = list[Message]

Tool: TypeAlias = dict[str, Any]
"""An OpenAI function tool: ``{"type": "function", "function": {"name", "description",
"parameters"}}``; ``parameters`` is a JSON Schema object."""

RewardMap: TypeAlias = Mapping[str, float]

SPLITS: tuple[DatasetSplit, ...] = ("train", "eval")


@dataclass(frozen=True, slots=True)
class Example:
    """One dataset item with a stable identity.

    ``payload`` holds ``prompt_messages`` plus any opaque fields the reward reads
    later; the id survives re-ordering of the file, so resume and diff can match
    examples across runs.
    """

    id: str
    payload: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError("Example.id must be a non-empty string")
        if not isinstance(self.payload, Mapping):
            raise TypeError(
                f"Example.payload must be a mapping, got {type(self.payload).__name__}"
            )
