"""The rollout engine: the standard model loop, scoring and group scoring.

One ``Engine`` serves one env instance and any number of concurrent groups; it
owns the model clients (one pool per endpoint) but not the env's lifetime, which
belongs to whoever constructed the env (the runner, a trainer).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmax.engine import logs
from benchmax.engine.client import ChatResult, ClientPool, ModelError, RetryPolicy
from benchmax.engine.scoring import (
    InvalidRewards,
    check_group_rewards,
    check_rewards,
    merge_rewards,
)
from benchmax.engine.tools import (
    assistant_message,
    parse_tool_calls,
    run_tool_calls,
    validate_tools,
)
from benchmax.envs.base_env import BaseEnv, check_env_definition, implements
from benchmax.envs.environment import check_group
from benchmax.envs.errors import RolloutFailure
from benchmax.envs.rollout import (
    BaseRollout,
    LogEntry,
    RolloutOutcome,
    RolloutRequest,
    TurnRecord,
)
from benchmax.envs.termination import TerminationReason, is_scorable
from benchmax.envs.types import Message, Tool

logger = logging.getLogger("benchmax.engine")

_TOOL_CACHE_SIZE = 256
_GC_DEFAULT = (700, 10, 10)
_GC_TUNED = (20_000, 10, 10)


def _tune_gc() -> None:
    """Make young-generation collections rarer, unless someone already chose thresholds.

    With hundreds of rollouts in flight every young object is still alive at a
    gen-0 pass, so at CPython's default (a pass per 700 net allocations) the
    collector ran ~800 times per 4,096 rollouts, promoted live transcripts and
    then rescanned them in gen-1/gen-2 passes that stalled the loop for up to
    300 ms: about 30% of the driver's CPU at 1,024 in flight (``bench/README.md``).
    Rollout data is acyclic and freed by reference counting, so collecting less
    often only lets a few MB of cyclic garbage wait longer.
    """
    if gc.get_threshold() == _GC_DEFAULT:
        gc.set_threshold(*_GC_TUNED)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Time limits, size bounds and retry policy; every field has a safe default."""

    request_timeout: float = 600.0
    """Seconds for one model request (each retry gets its own)."""
    tool_timeout: float | None = 300.0
    """Seconds for one tool call; past it the rollout ends as ``timeout``."""
    rollout_timeout: float | None = None
    """Seconds for a whole rollout, context and scoring included."""
    max_concurrent_requests: int = 256
    """Requests in flight per endpoint, shared by all rollouts (vLLM's default
    ``max_num_seqs`` is 256: more only queues inside the server)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_content_chars: int = 200_000
    """Model text kept per message (longer is truncated, and marked)."""
    max_tool_result_chars: int = 100_000
    """Tool result text kept and sent back per call (longer is truncated, and marked)."""
    max_log_records: int = 1000
    log_level: int = logging.INFO

    def __post_init__(self) -> None:
        for name in ("request_timeout", "tool_timeout", "rollout_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"EngineConfig.{name} must be > 0 seconds or None, got {value!r}")
        for name in ("max_concurrent_requests", "max_content_chars", "max_tool_result_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineConfig.{name} must be >= 1")


@dataclass(frozen=True, slots=True)
class GroupResult:
    """One example's settled siblings, in request order, and the group hook's logs."""

    outcomes: tuple[RolloutOutcome, ...]
    logs: tuple[LogEntry, ...] = ()

    def by_id(self) -> dict[str, RolloutOutcome]:
        return {outcome.rollout_id: outcome for outcome in self.outcomes}


@dataclass(slots=True)
class _Attempt:
    request: RolloutRequest
    messages: list[Message]
    example_args: dict[str, Any]
    started_at: float
    sink: logs.LogSink
    turns: list[TurnRecord] = field(default_factory=list)
    reason: str = TerminationReason.FINISHED
    error: str | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    ended_at: float = 0.0
    rollout: BaseRollout | None = None

    @property
    def scorable(self) -> bool:
        return is_scorable(self.reason)

    def fail(self, reason: str, error: str) -> None:
        self.reason = reason
        self.error = error
        self.rewards = {}


class Engine:
    def __init__(
        self,
        env: BaseEnv,
        config: EngineConfig | None = None,
        *,
        clients: ClientPool | None = None,
    ) -> None:
        self.env = env
        self.config = config or EngineConfig()
        self.clients = clients or ClientPool(
            timeout=self.config.request_timeout,
            max_concurrency=self.config.max_concurrent_requests,
            retry=self.config.retry,
        )
        self._name = type(env).__name__
        self._has_reward = implements(env, "compute_reward")
        self._has_group_reward = implements(env, "compute_group_rewards")
        self._started = False
        self._tools_by_identity: dict[int, tuple[object, dict[str, Tool]]] = {}
        self._tools_by_content: dict[bytes, dict[str, Tool]] = {}
        logs.install(self.config.log_level)

    async def start(self) -> dict[str, Tool]:
        """Check the env's definition and tool schemas once, before any rollout."""
        check_env_definition(self.env)
        tools = validate_tools(await self.env.list_tools(), owner=self._name)
        _tune_gc()
        self._started = True
        return tools

    async def run_rollout(self, request: RolloutRequest) -> RolloutOutcome:
        return (await self.run_group([request])).outcomes[0]

    async def run_group(self, requests: Sequence[RolloutRequest]) -> GroupResult:
        """Run siblings concurrently, score each, then score the group.

        If the caller cancels this coroutine, every sibling is cancelled, every
        rollout context is exited, and the cancellation propagates: a group is
        settled whole or not at all.
        """
        check_group(requests)
        if not self._started:
            await self.start()
        tasks = [asyncio.create_task(self._attempt(request, self._chat_loop)) for request in requests]
        return await self._settle(tasks)

    async def rescore_group(
        self, requests: Sequence[RolloutRequest], transcripts: Sequence[StoredRollout]
    ) -> GroupResult:
        """Score stored transcripts again with the env's current reward code, without the model.

        Each rollout's context is entered as in a live run, so a reward that reads
        per-rollout resources finds them; tools are not re-run.
        """
        check_group(requests)
        if len(transcripts) != len(requests):
            raise ValueError("rescore_group needs one stored transcript per request")
        if not self._started:
            await self.start()
        tasks = [
            asyncio.create_task(self._attempt(request, functools.partial(_replay, stored)))
            for request, stored in zip(requests, transcripts, strict=True)
        ]
        return await self._settle(tasks)

    async def _settle(self, tasks: list[asyncio.Task[_Attempt]]) -> GroupResult:
        try:
            attempts = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        group_logs = await self._score_group(attempts) if self._has_group_reward else ()
        return GroupResult(tuple(_outcome(attempt) for attempt in attempts), group_logs)

    async def aclose(self) -> None:
        await self.clients.aclose()

    async def _attempt(
        self, request: RolloutRequest, body: Callable[[_Attempt], Awaitable[None]]
    ) -> _Attempt:
        payload = request.example.payload
        attempt = _Attempt(
            request=request,
            messages=[dict(message) for message in payload["prompt_messages"]],
            example_args={key: value for key, value in payload.items() if key != "prompt_messages"},
            started_at=time.time(),
            sink=logs.LogSink(max_records=self.config.max_log_records),
        )
        with logs.capture(attempt.sink):
            try:
                async with asyncio.timeout(self.config.rollout_timeout) as deadline:
                    async with self.env.rollout_context(request.rollout_id, request.example):
                        await body(attempt)
                        if attempt.scorable and self._has_reward:
                            await self._score(attempt)
                        attempt.sink.phase = "context"
            except RolloutFailure as exc:
                attempt.fail(exc.reason, exc.message or exc.reason)
            except TimeoutError as exc:
                if deadline.expired():
                    attempt.fail(
                        TerminationReason.TIMEOUT,
                        f"rollout ran past its {self.config.rollout_timeout:g}s limit "
                        f"(during {attempt.sink.phase})",
                    )
                else:
                    self._context_failed(attempt, exc)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                attempt.fail(TerminationReason.CANCELLED, "the rollout's task was cancelled")
            except Exception as exc:
                self._context_failed(attempt, exc)
            attempt.ended_at = time.time()
        return attempt

    def _context_failed(self, attempt: _Attempt, exc: BaseException) -> None:
        with logs.capture(attempt.sink):
            logger.error(
                "rollout_context or list_tools of %s failed", self._name, exc_info=exc
            )
        attempt.fail(TerminationReason.CONTEXT_ERROR, f"{type(exc).__name__}: {exc}")

    async def _tools(self) -> dict[str, Tool]:
        """The rollout's tools, validated once per distinct declaration."""
        tools = await self.env.list_tools()
        hit = self._tools_by_identity.get(id(tools))
        if hit is not None and hit[0] is tools:
            return hit[1]
        try:
            key = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            key = None
        by_name = self._tools_by_content.get(key) if key is not None else None
        if by_name is None:
            by_name = validate_tools(tools, owner=self._name)
            if key is not None and len(self._tools_by_content) < _TOOL_CACHE_SIZE:
                self._tools_by_content[key] = by_name
        if len(self._tools_by_identity) < _TOOL_CACHE_SIZE:
            self._tools_by_identity[id(tools)] = (tools, by_name)
        return by_name

    async def _chat_loop(self, attempt: _Attempt) -> None:
        request = attempt.request
        env = self.env
        config = self.config
        sink = attempt.sink
        sink.phase = "context"
        known = await self._tools()
        tool_list = list(known.values())
        client = self.clients.get(request.base_url, request.model_auth)
        base_body = request.sampling.to_body()
        base_body["model"] = request.model
        if tool_list:
            base_body["tools"] = tool_list
        messages = attempt.messages
        max_turns = env.max_turns or 1
        budget = env.max_tool_calls
        used = 0
        for turn in range(max_turns):
            sink.turn = turn
            sink.phase = "model"
            body = dict(base_body)
            body["messages"] = messages
            started_at = time.time()
            clock = time.perf_counter()
            try:
                result = await client.chat(body, rollout_id=request.rollout_id)
            except ModelError as error:
                attempt.reason = error.reason
                attempt.error = str(error)
                return
            model_seconds = time.perf_counter() - clock
            calls = parse_tool_calls(result.message, turn=turn)
            messages.append(assistant_message(result.message, calls, config.max_content_chars))

            record = functools.partial(_turn_record, attempt.turns, turn, started_at, model_seconds, result)
            if result.finish_reason == "length":
                record()
                attempt.reason = TerminationReason.OUTPUT_EXCEEDED
                return
            if not calls:
                record()
                attempt.reason = TerminationReason.FINISHED
                return
            if budget is not None and used + len(calls) > budget:
                record()
                attempt.reason = TerminationReason.TOOL_BUDGET_EXCEEDED
                attempt.error = (
                    f"turn {turn} asked for {len(calls)} tool calls with {budget - used} "
                    f"of max_tool_calls={budget} left"
                )
                return
            used += len(calls)
            sink.phase = "tools"
            clock = time.perf_counter()
            tool_messages, stop = await run_tool_calls(
                env,
                request.rollout_id,
                calls,
                known,
                timeout=config.tool_timeout,
                max_chars=config.max_tool_result_chars,
            )
            messages.extend(tool_messages)
            record(time.perf_counter() - clock, len(calls))
            if stop is not None:
                attempt.reason = stop.reason
                attempt.error = stop.error
                return
        attempt.reason = TerminationReason.MAX_TURNS_EXCEEDED

    def _rollout_view(self, attempt: _Attempt) -> BaseRollout:
        request = attempt.request
        return BaseRollout(
            rollout_id=request.rollout_id,
            messages=attempt.messages,
            example_args=attempt.example_args,
            split=request.split,
            termination_reason=attempt.reason,
            example_id=request.example.id,
            turns=tuple(attempt.turns),
            rewards=dict(attempt.rewards),
            error=attempt.error,
        )

    async def _score(self, attempt: _Attempt) -> None:
        attempt.sink.phase = "reward"
        try:
            raw = await self.env.compute_reward(self._rollout_view(attempt))
            attempt.rewards = check_rewards(raw, hook="compute_reward")
        except RolloutFailure:
            raise
        except InvalidRewards as exc:
            logger.error("%s", exc)
            attempt.fail(TerminationReason.REWARD_ERROR, str(exc))
        except Exception as exc:
            logger.exception("compute_reward raised %s", type(exc).__name__)
            attempt.fail(TerminationReason.REWARD_ERROR, f"compute_reward raised {type(exc).__name__}: {exc}")

    async def _score_group(self, attempts: Sequence[_Attempt]) -> tuple[LogEntry, ...]:
        scorable = [attempt for attempt in attempts if attempt.scorable]
        if not scorable:
            return ()
        sink = logs.LogSink(max_records=self.config.max_log_records, phase="group_reward")
        rollouts = [self._rollout_view(attempt) for attempt in scorable]
        with logs.capture(sink):
            try:
                async with asyncio.timeout(self.config.rollout_timeout) as deadline:
                    raw = await self.env.compute_group_rewards(rollouts)
                by_id = check_group_rewards(raw, rollouts)
                merged = {
                    attempt.request.rollout_id: merge_rewards(
                        attempt.rewards,
                        by_id.get(attempt.request.rollout_id, {}),
                        attempt.request.rollout_id,
                    )
                    for attempt in scorable
                }
            except RolloutFailure as exc:
                for attempt in scorable:
                    attempt.fail(exc.reason, exc.message or exc.reason)
            except TimeoutError as exc:
                if not deadline.expired():
                    logger.exception("compute_group_rewards raised %s", type(exc).__name__)
                message = (
                    f"compute_group_rewards ran past the {self.config.rollout_timeout:g}s rollout limit"
                    if deadline.expired()
                    else f"compute_group_rewards raised {type(exc).__name__}: {exc}"
                )
                for attempt in scorable:
                    attempt.fail(TerminationReason.GROUP_REWARD_ERROR, message)
            except InvalidRewards as exc:
                logger.error("%s", exc)
                for attempt in scorable:
                    attempt.fail(TerminationReason.GROUP_REWARD_ERROR, str(exc))
            except Exception as exc:
                logger.exception("compute_group_rewards raised %s", type(exc).__name__)
                for attempt in scorable:
                    attempt.fail(
                        TerminationReason.GROUP_REWARD_ERROR,
                        f"compute_group_rewards raised {type(exc).__name__}: {exc}",
                    )
            else:
                for attempt in scorable:
                    attempt.rewards = merged[attempt.request.rollout_id]
        return sink.freeze()


@dataclass(frozen=True, slots=True)
class StoredRollout:
    """A transcript as a run store kept it, for rescoring."""

    messages: list[Message]
    termination_reason: str
    error: str | None = None
    turns: tuple[TurnRecord, ...] = ()


async def _replay(stored: StoredRollout, attempt: _Attempt) -> None:
    attempt.messages[:] = [dict(message) for message in stored.messages]
    attempt.turns[:] = stored.turns
    attempt.reason = stored.termination_reason
    attempt.error = stored.error


def _turn_record(
    turns: list[TurnRecord],
    index: int,
    started_at: float,
    model_seconds: float,
    result: ChatResult,
    tool_seconds: float = 0.0,
    tool_calls: int = 0,
) -> None:
    turns.append(
        TurnRecord(
            index=index,
            started_at=started_at,
            model_seconds=model_seconds,
            tool_seconds=tool_seconds,
            finish_reason=result.finish_reason,
            usage=result.usage,
            tool_calls=tool_calls,
            prompt_token_ids=result.prompt_token_ids,
            completion_token_ids=result.completion_token_ids,
            completion_logprobs=result.completion_logprobs,
        )
    )


def _outcome(attempt: _Attempt) -> RolloutOutcome:
    request = attempt.request
    rewards: Mapping[str, float] = attempt.rewards if attempt.scorable else {}
    return RolloutOutcome(
        rewards=dict(rewards),
        termination_reason=str(attempt.reason),
        error=attempt.error,
        rollout_id=request.rollout_id,
        example_id=request.example.id,
        split=request.split,
        messages=attempt.messages,
        turns=tuple(attempt.turns),
        logs=attempt.sink.freeze(),
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        sampling=request.sampling,
    )
