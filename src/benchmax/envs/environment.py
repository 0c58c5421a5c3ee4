"""The lower-level, group-native contract that trainers drive.

``BaseEnv`` implements it with the standard chat/tool loop; an env with its own
harness (a terminal agent, a game) can implement ``run_rollout`` directly and
still plug into the runner, the store and the trainers.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from benchmax.envs.dataset import Dataset
from benchmax.envs.rollout import RolloutOutcome, RolloutRequest
from benchmax.envs.types import DatasetSplit


class Environment(ABC):
    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset:
        """Map a split to a finite dataset."""

    @abstractmethod
    async def run_rollout(self, request: RolloutRequest) -> RolloutOutcome:
        """Run and score one rollout."""

    async def run_group(self, requests: Sequence[RolloutRequest]) -> dict[str, RolloutOutcome]:
        """Run the siblings of one example concurrently; outcomes keyed by rollout id."""
        check_group(requests)
        outcomes = await asyncio.gather(*(self.run_rollout(request) for request in requests))
        return {request.rollout_id: outcome for request, outcome in zip(requests, outcomes, strict=True)}

    async def aclose(self) -> None:
        """Close environment-owned shared resources."""


def check_group(requests: Sequence[RolloutRequest]) -> None:
    """A group is non-empty, of one example, with unique rollout ids."""
    if not requests:
        raise ValueError("a rollout group needs at least one request")
    ids = [request.rollout_id for request in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a rollout group has duplicate rollout ids: {sorted(ids)}")
    examples = {request.example.id for request in requests}
    if len(examples) != 1:
        raise ValueError(f"a rollout group must target one example, got {sorted(examples)}")
