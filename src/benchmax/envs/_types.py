"""Plain shapes shared by environments, the engine and every face.

Messages and tools are plain OpenAI chat-format dicts on purpose: env authors
already know that format, every model server speaks it, and it serialises
straight into the run store without an adapter layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

DatasetSplit: TypeAlias = Literal["train", "eval"]
"""Which traffic an example serves: training rollouts or evaluation."""

SPLITS: tuple[DatasetSplit, ...] = ("train", "eval")

Message: TypeAlias = dict[str, Any]
"""One OpenAI chat message: ``{"role": ..., "content": ...}`` plus tool fields."""

Messages: TypeAlias = list[Message]

Tool: TypeAlias = dict[str, Any]
"""An OpenAI function tool: ``{"type": "function", "function": {"name", "description",
"parameters"}}``; ``parameters`` is a JSON Schema object."""

RewardMap: TypeAlias = Mapping[str, float]

MAX_REWARD_COMPONENTS = 256
"""The most components one rollout's rewards may have (individual and group together).

A component is a named column of every reader (store rows, inspector tables,
exports, training metrics): an env that returns thousands of them, or one name
of a megabyte, has a bug, and its output would swell the store and every page
that shows it. Such rewards are refused as a ``reward_error``."""

MAX_REWARD_NAME_CHARS = 200
"""The longest a reward component's name may be (see :data:`MAX_REWARD_COMPONENTS`)."""

JsonRow: TypeAlias = dict[str, Any]
"""One JSON object read from a dataset file."""
