"""The scoring steps of the standard loop: ``compute_reward`` for one rollout, ``compute_group_rewards``
for its group, with the 0.2.x settling rules for each hook's failure.

``Engine`` runs them as its own methods; they are kept apart from the model turns and tools they
follow, which are the engine's other half.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from benchmax.engine._attempt import _Attempt
from benchmax.engine._config import EngineConfig
from benchmax.engine._logs import LogSink
from benchmax.engine._rules import goes_to_scoring, require_a_component
from benchmax.engine._scoring import InvalidRewards, check_group_rewards, check_rewards, merge_rewards
from benchmax.envs import BaseEnv, BaseRollout, Environment, LogEntry, RolloutFailure, TerminationReason, capture_logs
from benchmax.telemetry import fail_span, group_span, span

logger = logging.getLogger("benchmax.engine")


class _GroupTimeout(Exception):
    pass


class _ScoreSteps:
    """``Engine``'s scoring methods; the engine sets the attributes they read."""

    env: Environment[Any, Any]
    config: EngineConfig
    _has_group_reward: bool
    _scorable: frozenset[str]
    _view: Callable[[_Attempt], BaseRollout]

    async def _score(self, attempt: _Attempt) -> None:
        assert isinstance(self.env, BaseEnv)
        attempt.sink.phase = "reward"
        with span("compute_reward") as active:
            await self._score_with(attempt)
            if attempt.scoring_error is not None:
                fail_span(active, str(attempt.reason), attempt.scoring_error)

    async def _score_with(self, attempt: _Attempt) -> None:
        assert isinstance(self.env, BaseEnv)
        try:
            raw = await self.env.compute_reward(self._view(attempt))
            attempt.rewards = check_rewards(raw, hook="compute_reward") if raw is not None else None
        except RolloutFailure as exc:
            logger.error("compute_reward failed: %s (%s)", exc.message, exc.termination_reason)
            attempt.settle(exc.termination_reason, exc.message)
        except InvalidRewards as exc:
            logger.error("%s", exc)
            attempt.settle(TerminationReason.REWARD_ERROR, str(exc))
        except Exception as exc:
            logger.exception("compute_reward raised %s", type(exc).__name__)
            attempt.settle(TerminationReason.REWARD_ERROR, f"compute_reward raised {type(exc).__name__}: {exc}")

    async def _score_group(self, attempts: Sequence[_Attempt]) -> tuple[LogEntry, ...]:
        scorable = [
            attempt for attempt in attempts if goes_to_scoring(attempt.reason, self._scorable, not attempt.scorable)
        ]
        if not scorable:
            return ()
        sink = LogSink(max_records=self.config.max_log_records, phase="group_reward")
        traced = group_span([attempt.span for attempt in scorable]) if self._has_group_reward else None
        with capture_logs(sink):
            try:
                if traced is None:
                    merged = await self._group_rewards(scorable)
                else:
                    with traced:
                        merged = await self._group_rewards(scorable)
            except RolloutFailure as exc:
                logger.error("compute_group_rewards failed: %s (%s)", exc.message, exc.termination_reason)
                for attempt in scorable:
                    attempt.settle(exc.termination_reason, exc.message)
            except InvalidRewards as exc:
                logger.error("%s", exc)
                for attempt in scorable:
                    attempt.settle(TerminationReason.GROUP_REWARD_ERROR, str(exc))
            except _GroupTimeout as exc:
                for attempt in scorable:
                    attempt.settle(TerminationReason.GROUP_REWARD_ERROR, str(exc))
            except Exception as exc:
                logger.exception("compute_group_rewards raised %s", type(exc).__name__)
                for attempt in scorable:
                    attempt.settle(
                        TerminationReason.GROUP_REWARD_ERROR,
                        f"compute_group_rewards raised {type(exc).__name__}: {exc}",
                    )
            else:
                for attempt in scorable:
                    attempt.rewards = merged[attempt.request.rollout_id]
        return sink.freeze()

    async def _group_rewards(self, scorable: Sequence[_Attempt]) -> dict[str, dict[str, float]]:
        """Each scored sibling's rewards with the group hook's merged in; the 0.2.x checks raise."""
        by_id: dict[str, dict[str, float]] = {}
        if self._has_group_reward:
            views = [self._view(attempt) for attempt in scorable]
            try:
                async with asyncio.timeout(self.config.rollout_timeout) as deadline:
                    raw = await self.env.compute_group_rewards(views)  # type: ignore[arg-type]
            except TimeoutError:
                if deadline.expired():
                    raise _GroupTimeout(
                        f"compute_group_rewards ran past the {self.config.rollout_timeout:g}s rollout limit"
                    ) from None
                raise
            by_id = check_group_rewards(raw, views)
        merged = {}
        for attempt in scorable:
            rollout_id = attempt.request.rollout_id
            rewards = merge_rewards(attempt.rewards or {}, by_id.get(rollout_id, {}), rollout_id)
            require_a_component(rewards, attempt.reason, rollout_id)
            merged[rollout_id] = rewards
        return merged
