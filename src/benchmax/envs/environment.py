"""The group-native contract trainers drive (0.2.x's module path).

An :class:`Environment` maps a split to a dataset and runs one rollout at a time
(``run_rollout``); ``run_group`` runs an example's siblings concurrently, scores
the group (``compute_group_rewards``) and settles every sibling, failures
included, without cancelling the others. ``BaseEnv`` implements
``run_rollout`` with the standard chat/tool loop; an env with its own harness (a
terminal agent, a game) implements ``run_rollout`` directly and still plugs into
the runner, the store and the trainers.

The settling itself is the engine's (one mechanism for every env, with the
rollout's transcript, timings and log records kept); ``run_group`` reaches it
through :mod:`benchmax.envs._runtime`, the one documented seam from the
contract to the engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.envs._records import (
    DatasetSplit,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,  # noqa: F401
    RolloutOutcome,
    RolloutRequest,
    ValidationDiagnostic,
)
from benchmax.envs._termination import SCORABLE_REASONS, settle_termination_reason
from benchmax.envs.dataset import Dataset
from benchmax.envs.logging import group_context, rollout_context  # noqa: F401

__all__ = ["Environment", "settle_termination_reason"]

Payload = TypeVar("Payload")
Attempt = TypeVar("Attempt", bound=RolloutAttempt)


class Environment(ABC, Generic[Payload, Attempt]):
    """A dataset plus a way to run one rollout; groups, scoring and settling come with it."""

    scorable_termination_reasons: frozenset[str] = SCORABLE_REASONS
    """Reasons whose rollouts are scored (budget stops included, as the model's doing)."""

    @property
    def requires_public_model_endpoint(self) -> bool:
        """Whether rollouts run somewhere that needs a public model URL (a remote sandbox)."""
        return False

    @property
    def unavailable(self) -> str | None:
        """Why the env can run no more rollouts (the server behind it went away), else ``None``.

        A run that sees it stops instead of storing the rollouts it touched as failures;
        ``--resume`` runs them again once the env is back.
        """
        return None

    def validation_diagnostics(self) -> Sequence[ValidationDiagnostic]:
        """Static warnings and errors about the env's configuration, shown by ``benchmax validate``."""
        return ()

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[Payload]:
        """A fixed, ordered dataset for ``split``; at most ``max_examples`` when set."""

    @abstractmethod
    async def run_rollout(self, request: RolloutRequest[Payload]) -> Attempt:
        """Run exactly one rollout and return what happened (its rewards, when it scores itself)."""

    async def compute_group_rewards(self, rollouts: Sequence[Attempt]) -> Mapping[str, RewardMap] | Any:
        """Optionally score a finished sibling group jointly: ``{rollout_id: {component: value}}``.

        Only scored siblings are passed. Raise ``RolloutFailure`` for an expected
        failure (a judge outage) to settle them under that reason; any other
        exception or a misaligned result settles them as ``group_reward_error``.
        """
        return None

    async def run_group(self, requests: Sequence[RolloutRequest[Payload]]) -> Mapping[str, RolloutOutcome]:
        """Run one example's siblings concurrently and settle each; outcomes keyed by rollout id."""
        from benchmax.envs._runtime import engine_for

        result = await engine_for(self).run_group(requests)
        return result.by_id()

    async def aclose(self) -> None:
        """Close environment-owned shared resources."""


def check_group(requests: Sequence[RolloutRequest[Any]]) -> None:
    """A group is non-empty, of one example and one split, with unique rollout ids."""
    if not requests:
        raise ValueError("a rollout group needs at least one request")
    ids = [request.rollout_id for request in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a rollout group has duplicate rollout IDs: {sorted(ids)}")
    examples = {request.example.id for request in requests}
    if len(examples) != 1:
        raise ValueError(f"a rollout group must target one example, got {sorted(examples)}")
    if len({request.split for request in requests}) != 1:
        raise ValueError("all rollout requests of a group must use one split")
