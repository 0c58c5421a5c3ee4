"""``BaseEnv``: the authoring contract of ``docs/contract.md`` (0.2.x's module path).

Env authors override hooks; the loop itself lives in :mod:`benchmax.engine`, so
this module stays a description of *what* an env is, not *how* it is run.
"""

from __future__ import annotations

import functools
import inspect
import os
from abc import abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.auth import ModelRequestContext  # noqa: F401
from benchmax.envs._errors import EnvDefinitionError
from benchmax.envs._records import (
    DatasetSplit,
    Example,
    JsonRow,
    Messages,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,  # noqa: F401
    RolloutRequest,
    Tool,
    TurnRecord,
    Usage,
    total_usage,
)
from benchmax.envs._response import EnvResponse
from benchmax.envs._runtime import close_default_engine, engine_for
from benchmax.envs._termination import settle_termination_reason  # noqa: F401
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment

__all__ = ["BaseEnv", "BaseRollout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRollout(RolloutAttempt):
    """A finished model loop, as the scoring hooks see it.

    ``messages`` is the full transcript (prompt included); ``example_args`` is the
    payload minus ``prompt_messages``; ``rewards`` is ``None`` until scored.
    """

    messages: Messages
    example_args: Mapping[str, Any]
    split: DatasetSplit = "train"
    example_id: str = ""
    turns: Sequence[TurnRecord] = field(default=())

    @property
    def usage(self) -> Usage:
        return total_usage(self.turns)


class BaseEnv(Environment[JsonRow, BaseRollout]):
    """A dataset, optional tools, and a reward: the standard model loop does the rest."""

    max_turns: int | None = None
    """How many model turns a rollout may take (required, positive; checked before the first rollout)."""
    max_tool_calls: int | None = None
    """How many tool calls a rollout may make in all (``None``: unbounded)."""
    check_tool_arguments: bool = False
    """Check each call's arguments against the tool's JSON Schema and send the mismatch back to
    the model instead of calling ``run_tool`` (off by default: 0.2.x passes arguments as sent)."""
    concurrent_tool_calls: bool = False
    """Run the tool calls of one turn concurrently (off by default: one after another, as 0.2.x)."""
    outcome_from_transcript: bool | None = None
    """Whether the scoring hooks read only what a run stores (the transcript, its turn records, the
    example), so ``benchmax rescore`` can recompute the outcome. ``None``: yes for an env without
    ``env_response``; no for one with it, whose hooks may read state the episode built (a game
    board), which only a replay of the episode rebuilds: rescore then refuses instead of scoring
    stale state. Turn rewards (``env_response``'s) are never recomputed by rescore: they are kept."""

    def __init__(self, *, max_turns: int | None = None, max_tool_calls: int | None = None) -> None:
        if max_turns is not None:
            self.max_turns = max_turns
        if max_tool_calls is not None:
            self.max_tool_calls = max_tool_calls
        check_limits(self)

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """Required: map a split (``"train"`` or ``"eval"``) to a finite dataset."""

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        """Score one finished rollout: ``{component: value}``."""
        return None

    async def list_tools(self) -> list[Tool]:
        """Declare OpenAI-compatible function tools. Defaults to none."""
        return []

    async def tools_for(self, example: Example[JsonRow]) -> list[Tool]:
        """The tools the model sees in a rollout of ``example``. Defaults to ``list_tools()``.

        Override it when rows of one dataset need different tools (calculator rows
        get a calculator, text rows none), so no row's prompt carries another
        row type's tool schemas. The engine sends only these to the model and
        answers a call to any other tool as an unknown tool; it checks each
        distinct set once, and a set that is not valid fails only the rollouts
        of the examples that use it (``context_error``, naming the example).
        """
        return await self.list_tools()

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Execute one tool call; the return value is the tool result the model sees."""
        raise ValueError(f"Unknown tool: {tool_name}")

    async def env_response(self, rollout: BaseRollout) -> EnvResponse | None:
        """Answer the model's latest turn: an observation, a reward for the turn, or the end of the episode.

        Optional. Without it a reply without tool calls ends the rollout (the loop of
        0.2.x). With it, the engine calls it after every assistant turn that ended
        cleanly, once that turn's tool calls have run, with the transcript so far
        (``rollout.messages`` ends with the reply or its tool results;
        ``rollout.turns[-1]`` is the turn being answered). Return an
        :class:`EnvResponse` (messages to append as user turns, ``rewards`` for the
        turn, ``done``), or ``None`` for nothing to add: then the turn goes on as
        without the hook (tool results go back to the model, a plain reply finishes).
        Keep per-episode state keyed by ``rollout.rollout_id`` (set up in
        ``rollout_context``), as ``run_tool`` does. ``rollout.messages`` is the live
        transcript: read it, and return what to add rather than appending to it.
        """
        return None

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example[JsonRow]) -> AsyncIterator[None]:
        """Acquire per-rollout resources before the prompt; release them after scoring."""
        yield

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        """The standard loop for one request: context, model turns and tools, then ``compute_reward``.

        Override it to wrap the loop (call ``super().run_rollout(request)``) or to
        replace it; the engine calls the override for every rollout.
        """
        return await engine_for(self).standard_rollout(request)

    async def aclose(self) -> None:
        """Close environment-owned shared resources."""
        await close_default_engine(self)

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
                await close_default_engine(self)

        aclose._benchmax_closes_engine = True  # type: ignore[attr-defined]
        cls.aclose = aclose  # type: ignore[method-assign]


def implements(env: Environment[Any, Any] | type[Environment[Any, Any]], hook: str) -> bool:
    """Whether ``env`` overrides the default of ``hook`` (``BaseEnv``'s, or ``Environment``'s)."""
    cls = env if isinstance(env, type) else type(env)
    base = BaseEnv if issubclass(cls, BaseEnv) else Environment
    return getattr(cls, hook, None) is not getattr(base, hook, None)


def hook_source(env: Environment[Any, Any], hook: str) -> str:
    """``file:line`` where ``env`` defines ``hook`` (relative to the working directory when under it),
    so an error about the hook sends its author straight there; ``?`` when the source is unknown."""
    function = inspect.unwrap(getattr(type(env), hook))
    try:
        path = inspect.getsourcefile(function) or "?"
        line = inspect.getsourcelines(function)[1]
    except (OSError, TypeError):
        return "?"
    return f"{shown_path(path)}:{line}"


def shown_path(path: str) -> str:
    """``path`` relative to the working directory when it lies under it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def replay_only(env: Environment[Any, Any]) -> tuple[str, ...]:
    """The reward parts of ``env`` that only a replay of the episode could compute again
    (``"turn rewards"``, ``"outcome"``), so ``benchmax rescore`` says so instead of returning stale numbers."""
    if not isinstance(env, BaseEnv) or not implements(env, "env_response"):
        return ()
    return ("turn rewards",) if env.outcome_from_transcript else ("turn rewards", "outcome")


def check_limits(env: BaseEnv) -> None:
    """Refuse unusable ``max_turns``/``max_tool_calls`` values (``max_turns`` may still be unset)."""
    name = type(env).__name__
    max_turns = env.max_turns
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
        raise EnvDefinitionError(f"{name}.max_turns must be a positive int, got {max_turns!r}")
    budget = env.max_tool_calls
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise EnvDefinitionError(f"{name}.max_tool_calls must be an int >= 0 or None, got {budget!r}")


def check_env_definition(env: BaseEnv) -> None:
    """Reject an env that can never produce a reward or has unusable limits: before any model call."""
    name = type(env).__name__
    check_limits(env)
    if env.max_turns is None:
        raise EnvDefinitionError(f"{name}.max_turns is not set; set it as a class attribute or pass max_turns=N")
    if not (
        implements(env, "compute_reward")
        or implements(env, "compute_group_rewards")
        or implements(env, "run_rollout")
    ):
        raise EnvDefinitionError(
            f"{name} implements neither compute_reward nor compute_group_rewards; "
            "define at least one so rollouts can be scored"
        )
    if implements(env, "env_response") and not inspect.iscoroutinefunction(inspect.unwrap(type(env).env_response)):
        raise EnvDefinitionError(
            f"{name}.env_response ({hook_source(env, 'env_response')}) must be a coroutine function: "
            "write it as async def env_response(self, rollout)"
        )
