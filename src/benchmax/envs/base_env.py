"""``BaseEnv``: the authoring contract of ``shared/spec/base-env.md``.

Env authors override hooks; the loop itself lives in :mod:`benchmax.engine`, so
this module stays a description of *what* an env is, not *how* it is run.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.errors import EnvDefinitionError, ToolError
from benchmax.envs.rollout import BaseRollout, RolloutOutcome, RolloutRequest
from benchmax.envs.types import DatasetSplit, Example, RewardMap, Tool

if TYPE_CHECKING:
    from benchmax.engine import Engine

GroupRewards = Mapping[str, RewardMap] | Sequence[RewardMap] | None


class BaseEnv(Environment):
    """A dataset, optional tools, and a reward: the standard model loop does the rest."""

    max_turns: int | None = None
    """How many model turns a rollout may take (required, positive)."""
    max_tool_calls: int | None = None
    """How many tool calls a rollout may make in all (``None``: unbounded)."""

    def __init__(self, *, max_turns: int | None = None, max_tool_calls: int | None = None) -> None:
        if max_turns is not None:
            self.max_turns = max_turns
        if max_tool_calls is not None:
            self.max_tool_calls = max_tool_calls
        check_env_definition(self)

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset:
        """Required: map a split (``"train"`` or ``"eval"``) to a finite dataset."""

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        """Score one completed rollout: ``{component: value}``."""
        return None

    async def compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> GroupRewards:
        """Score a completed sibling group jointly.

        Return ``{rollout_id: {component: value}}`` or a list of reward dicts in the
        order of ``rollouts``.
        """
        return None

    async def list_tools(self) -> list[Tool]:
        """Declare OpenAI-compatible function tools. Defaults to none."""
        return []

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Execute one tool call; the return value is the tool result the model sees."""
        raise ToolError(f"unknown tool: {tool_name}")

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        """Acquire per-rollout resources before the prompt; release them after scoring."""
        yield

    async def aclose(self) -> None:
        """Close environment-owned shared resources."""
        await self._close_default_engine()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Make an overriding ``aclose`` also close the engine behind ``run_group``.

        Env authors override ``aclose`` without calling ``super()``; the engine that
        the 0.2-style ``run_group`` creates would otherwise leak its connections.
        """
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("aclose")
        if own is None or getattr(own, "_benchmax_closes_engine", False):
            return

        @functools.wraps(own)
        async def aclose(self: BaseEnv) -> None:
            try:
                await own(self)
            finally:
                await self._close_default_engine()

        aclose._benchmax_closes_engine = True  # type: ignore[attr-defined]
        cls.aclose = aclose  # type: ignore[method-assign]

    async def _close_default_engine(self) -> None:
        engine = self.__dict__.pop("_benchmax_engine", None)
        if engine is not None:
            await engine.aclose()

    async def run_rollout(self, request: RolloutRequest) -> RolloutOutcome:
        outcomes = await self.run_group([request])
        return outcomes[request.rollout_id]

    async def run_group(self, requests: Sequence[RolloutRequest]) -> dict[str, RolloutOutcome]:
        """Run one example's siblings through this env's default engine."""
        result = await self._default_engine().run_group(requests)
        return result.by_id()

    def _default_engine(self) -> Engine:
        engine = self.__dict__.get("_benchmax_engine")
        if engine is None:
            from benchmax.engine import Engine

            engine = Engine(self)
            self.__dict__["_benchmax_engine"] = engine
        return engine


def implements(env: BaseEnv | type[BaseEnv], hook: str) -> bool:
    """Whether ``env`` overrides the default of ``hook``."""
    cls = env if isinstance(env, type) else type(env)
    return getattr(cls, hook, None) is not getattr(BaseEnv, hook)


def check_env_definition(env: BaseEnv) -> None:
    """Reject an env that can never produce a reward or has unusable limits."""
    name = type(env).__name__
    if not (implements(env, "compute_reward") or implements(env, "compute_group_rewards")):
        raise EnvDefinitionError(
            f"{name} implements neither compute_reward nor compute_group_rewards; "
            "define at least one so rollouts can be scored"
        )
    max_turns = env.max_turns
    if max_turns is None:
        raise EnvDefinitionError(
            f"{name}.max_turns is not set; set it as a class attribute or pass max_turns=N"
        )
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise EnvDefinitionError(f"{name}.max_turns must be a positive int, got {max_turns!r}")
    budget = env.max_tool_calls
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise EnvDefinitionError(
            f"{name}.max_tool_calls must be an int >= 0 or None, got {budget!r}"
        )
