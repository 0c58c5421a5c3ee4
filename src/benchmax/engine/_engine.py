"""The rollout engine: every rollout of every env is run and settled here.

One ``Engine`` serves one env instance and any number of concurrent groups; it
owns the model clients (one pool per endpoint) but not the env's lifetime,
which belongs to whoever constructed the env (the runner, a trainer).

A group runs its siblings concurrently. Each sibling runs the env's
``run_rollout`` when the env has its own (a custom harness, or a ``BaseEnv``
that wraps the standard loop), else the standard loop: ``rollout_context``,
model turns, tools and the env's answers (``env_response``), ``compute_reward``. Then the group is scored
(``compute_group_rewards`` over the scored siblings) and every sibling is
settled, failures included, with the rules of benchmax 0.2.x: a scoring failure
relabels only a clean finish (budget stops keep their reason), and a finished
rollout that ends with no reward component fails its group as
``group_reward_error``. Whatever the reason, a sibling whose scoring failed is
unscored (``RolloutOutcome.scoring_error``): the group hook skips it and no
component is kept beside its error. No sibling's failure cancels another.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from benchmax.client import ClientPool, ModelError, scoped_client
from benchmax.engine._attempt import _Attempt, _PausedDeadline, _turn_record
from benchmax.engine._config import EngineConfig
from benchmax.engine._env_turns import EnvTurn, env_turn, with_answer
from benchmax.engine._logs import LogSink, place_by_time
from benchmax.engine._records import GroupResult, StoredRollout
from benchmax.engine._rules import goes_to_scoring, reject_failure_rewards, turn_end_reason
from benchmax.engine._score_steps import _ScoreSteps
from benchmax.engine._scoring import InvalidRewards, check_rewards
from benchmax.engine._tools import assistant_message, parse_tool_calls, run_tool_calls, validate_tools
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    EnvDefinitionError,
    Environment,
    Example,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
    TerminationReason,
    Tool,
    capture_logs,
    check_env_definition,
    check_group,
    current_scope,
    enter_scope,
    hook_source,
    implements,
    install_log_capture,
)
from benchmax.telemetry import (
    end_rollout,
    leave_rollout,
    start_rollout,
    trace_id,
    traced_context,
)

logger = logging.getLogger("benchmax.engine")

_TOOL_CACHE_SIZE = 256
_GC_DEFAULT = (700, 10, 10)
_GC_TUNED = (20_000, 10, 10)
_NO_FINISH_REASON = "the model server sent no usable finish_reason"
_ANSWERED = frozenset({TerminationReason.FINISHED, TerminationReason.OUTPUT_EXCEEDED})
"""How a reply without tool calls may end for ``env_response`` to answer it: finished, or cut for
length (the env may tell the model its reply was cut and go on; ``None`` keeps ``output_exceeded``)."""


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


class Engine(_ScoreSteps):
    def __init__(
        self,
        env: Environment[Any, Any],
        config: EngineConfig | None = None,
        *,
        clients: ClientPool | None = None,
    ) -> None:
        self.env = env
        self.config = config or EngineConfig()
        self.clients = clients or self.config.client_pool()
        self._name = type(env).__name__
        self._base = isinstance(env, BaseEnv)
        self._own_rollout = not self._base or implements(env, "run_rollout")
        self._has_reward = self._base and implements(env, "compute_reward")
        self._has_group_reward = implements(env, "compute_group_rewards")
        self._scorable = frozenset(getattr(env, "scorable_termination_reasons", ()))
        self._started = False
        self._own_tools = self._base and implements(env, "tools_for")
        self._env_turns = self._base and implements(env, "env_response")
        self._env_hook = hook_source(env, "env_response") if self._env_turns else ""
        self._tools_by_identity: dict[int, tuple[object, dict[str, Tool] | _BadTools]] = {}
        self._tools_by_content: dict[bytes, dict[str, Tool] | _BadTools] = {}
        install_log_capture(self.config.log_level)

    async def start(self) -> dict[str, Tool]:
        """Check the env's definition and tool schemas once, before any rollout."""
        tools: dict[str, Tool] = {}
        if isinstance(self.env, BaseEnv):
            check_env_definition(self.env)
            tools = validate_tools(await self.env.list_tools(), owner=self._name)
        _tune_gc()
        self._started = True
        return tools

    async def run_rollout(self, request: RolloutRequest[Any]) -> RolloutOutcome:
        return (await self.run_group([request])).outcomes[0]

    async def run_group(self, requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
        """Run siblings concurrently, score each, then score the group.

        If the caller cancels this coroutine, every sibling is cancelled, every
        rollout context is exited, and the cancellation propagates: a group is
        settled whole or not at all.
        """
        check_group(requests)
        if not self._started:
            await self.start()
        body = self._own if self._own_rollout else self._standard
        tasks = [asyncio.create_task(self._attempt(request, body)) for request in requests]
        return await self._settle(tasks)

    async def rescore_group(
        self, requests: Sequence[RolloutRequest[Any]], transcripts: Sequence[StoredRollout]
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
            asyncio.create_task(self._attempt(request, functools.partial(self._replay, stored)))
            for request, stored in zip(requests, transcripts, strict=True)
        ]
        return await self._settle(tasks)

    async def standard_rollout(self, request: RolloutRequest[Any]) -> BaseRollout:
        """``BaseEnv.run_rollout``'s default: the standard loop for one request, scored.

        Called from an env's override (``super().run_rollout(request)``) while the
        engine runs that rollout, it records into the same attempt; called on its
        own, it runs the rollout by itself.
        """
        current = current_scope().attempt
        ours = isinstance(current, _Attempt) and current.request.rollout_id == request.rollout_id
        if ours and not current.ran_standard:
            await self._standard(current)
            return self._view(current)
        attempt = await self._attempt(request, self._standard)
        self._end_trace(attempt)
        return self._view(attempt)

    async def aclose(self) -> None:
        await self.clients.aclose()

    # A group.

    async def _settle(self, tasks: list[asyncio.Task[_Attempt]]) -> GroupResult:
        try:
            attempts = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        group_logs = await self._score_group(attempts)
        return GroupResult(tuple(self._outcome(attempt) for attempt in attempts), group_logs)

    async def _attempt(self, request: RolloutRequest[Any], body: Callable[[_Attempt], Awaitable[None]]) -> _Attempt:
        payload = request.example.payload
        prompt = payload.get("prompt_messages") if isinstance(payload, Mapping) else None
        attempt = _Attempt(
            request=request,
            messages=[dict(message) for message in prompt or ()],
            example_args=(
                {key: value for key, value in payload.items() if key != "prompt_messages"}
                if isinstance(payload, Mapping)
                else {}
            ),
            started_at=time.time(),
            sink=LogSink(max_records=self.config.max_log_records),
        )
        example = request.example
        traced = start_rollout(request.rollout_id, example.id, request.split, request.model, example.env)
        if traced is not None:
            attempt.span = traced[0]
            attempt.trace_id = trace_id(traced[0])
        hold = _PausedDeadline() if self.config.rollout_timeout is not None else None
        rollout = replace(
            current_scope(), rollout_id=request.rollout_id, hold=hold, engine=self, attempt=attempt, trace=attempt.span
        )
        with enter_scope(rollout), capture_logs(attempt.sink):
            try:
                async with asyncio.timeout(self.config.rollout_timeout) as deadline:
                    if hold is not None:
                        hold.bind(deadline)
                    await body(attempt)
                    attempt.sink.phase = "context"
            except RolloutFailure as exc:
                attempt.fail(exc.termination_reason, exc.message)
            except TimeoutError as exc:
                if deadline.expired():
                    attempt.fail(
                        TerminationReason.TIMEOUT,
                        f"rollout ran past its {self.config.rollout_timeout:g}s limit (during {attempt.sink.phase})",
                    )
                else:
                    self._hook_failed(attempt, exc)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    attempt.fail(TerminationReason.CANCELLED, "the rollout's task was cancelled")
                    self._end_trace(attempt)
                    raise
                attempt.fail(TerminationReason.CANCELLED, "the rollout's task was cancelled")
            except Exception as exc:
                self._hook_failed(attempt, exc)
            finally:
                if traced is not None:
                    leave_rollout(traced[1])
            attempt.ended_at = time.time()
        return attempt

    @staticmethod
    def _end_trace(attempt: _Attempt) -> None:
        """Close the rollout's trace once it is settled (its reason and rewards are final)."""
        if attempt.span is not None:
            end_rollout(attempt.span, reason=str(attempt.reason), error=attempt.error, rewards=attempt.rewards)
            attempt.span = None

    def _hook_failed(self, attempt: _Attempt, exc: BaseException) -> None:
        if self._own_rollout:
            hook, reason = "run_rollout", TerminationReason.HARNESS_ERROR
        else:
            hook, reason = "rollout_context or list_tools", TerminationReason.CONTEXT_ERROR
        with capture_logs(attempt.sink):
            logger.error("%s of %s failed", hook, self._name, exc_info=exc)
        attempt.fail(reason, f"{type(exc).__name__}: {exc}")

    # One rollout: the env's own run_rollout, or the standard loop.

    async def _own(self, attempt: _Attempt) -> None:
        request = attempt.request
        attempt.sink.phase = "model"
        first_log = len(attempt.sink.entries)
        result = await self.env.run_rollout(request)
        if not isinstance(result, RolloutAttempt | RolloutOutcome):
            raise TypeError(f"run_rollout returned {type(result).__name__}, expected a RolloutAttempt (BaseRollout)")
        rollout_id = getattr(result, "rollout_id", "") or request.rollout_id
        if rollout_id != request.rollout_id:
            raise ValueError(f"run_rollout returned the rollout id {rollout_id!r} for request {request.rollout_id!r}")
        if isinstance(result, BaseRollout):
            attempt.messages = list(result.messages)
            if result.turns:
                attempt.turns = list(result.turns)
        elif isinstance(result, RolloutOutcome):
            attempt.messages = list(result.messages) or attempt.messages
            attempt.turns = list(result.turns) or attempt.turns
        # what the env's own loop logged here, by time among its turns (an outcome's own logs are placed)
        attempt.sink.entries[first_log:] = place_by_time(attempt.sink.entries[first_log:], attempt.turns)
        if isinstance(result, RolloutOutcome):
            attempt.sink.entries.extend(result.logs)
        attempt.reason = result.termination_reason
        attempt.error = result.error
        raw = result.rewards if isinstance(result, RolloutAttempt) else (result.rewards or None)
        if isinstance(result, RolloutOutcome) and result.scoring_error is not None:
            attempt.settle(TerminationReason.REWARD_ERROR, result.scoring_error)
            return
        if not goes_to_scoring(attempt.reason, self._scorable, not attempt.scorable):
            reject_failure_rewards(raw, request.rollout_id, attempt.reason)
            attempt.rewards = None
            return
        try:
            attempt.rewards = None if raw is None else check_rewards(raw, hook="run_rollout")
        except InvalidRewards as exc:
            logger.error("%s", exc)
            attempt.settle(TerminationReason.REWARD_ERROR, str(exc))

    async def _standard(self, attempt: _Attempt) -> None:
        attempt.ran_standard = True
        env = self.env
        assert isinstance(env, BaseEnv)
        context = env.rollout_context(attempt.request.rollout_id, attempt.request.example)
        async with context if attempt.span is None else traced_context(context):
            await self._chat_loop(attempt)
            if goes_to_scoring(attempt.reason, self._scorable, not attempt.scorable) and self._has_reward:
                await self._score(attempt)
            attempt.sink.phase = "context"

    async def _replay(self, stored: StoredRollout, attempt: _Attempt) -> None:
        attempt.ran_standard = True
        env = self.env
        assert isinstance(env, BaseEnv)
        context = env.rollout_context(attempt.request.rollout_id, attempt.request.example)
        async with context if attempt.span is None else traced_context(context):
            attempt.messages[:] = [dict(message) for message in stored.messages]
            attempt.turns[:] = stored.turns
            attempt.reason = stored.termination_reason
            attempt.error = stored.error
            if goes_to_scoring(attempt.reason, self._scorable, not attempt.scorable) and self._has_reward:
                await self._score(attempt)
            attempt.sink.phase = "context"

    async def _tools(self, example: Example[Any]) -> dict[str, Tool]:
        """The rollout's tools (``tools_for(example)``), validated once per distinct set.

        A hook that raises, or a set that is not valid, fails this rollout alone
        (``context_error``, naming the example): other examples' sets may be fine,
        so the run goes on. ``list_tools()`` itself was checked at :meth:`start`.
        """
        env = self.env
        assert isinstance(env, BaseEnv)
        hook = f"tools_for(example {example.id!r})" if self._own_tools else "list_tools()"
        try:
            tools = await env.tools_for(example)
        except RolloutFailure:
            raise
        except Exception as exc:
            logger.error("%s.%s failed", self._name, hook, exc_info=exc)
            raise RolloutFailure(
                TerminationReason.CONTEXT_ERROR, f"{self._name}.{hook} raised {type(exc).__name__}: {exc}"
            ) from None
        hit = self._tools_by_identity.get(id(tools))
        if hit is not None and hit[0] is tools:
            checked = hit[1]
        else:
            try:
                key: bytes | None = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
            except TypeError:
                key = None
            found = self._tools_by_content.get(key) if key is not None else None
            if found is None:
                try:
                    found = validate_tools(tools, owner=self._name, hook=hook.partition("(")[0] + "()")
                except EnvDefinitionError as exc:
                    found = _BadTools(str(exc))
                if key is not None and len(self._tools_by_content) < _TOOL_CACHE_SIZE:
                    self._tools_by_content[key] = found
            checked = found
            if len(self._tools_by_identity) < _TOOL_CACHE_SIZE:
                self._tools_by_identity[id(tools)] = (tools, checked)
        if isinstance(checked, _BadTools):
            logger.error("the tools of example %r are not valid: %s", example.id, checked.message)
            raise RolloutFailure(
                TerminationReason.CONTEXT_ERROR, f"the tools of example {example.id!r} are not valid: {checked.message}"
            )
        return checked

    async def _chat_loop(self, attempt: _Attempt) -> None:
        try:
            await self._turns(attempt)
        finally:  # a server that keeps a slot for the rollout's next turn (the embedded model) frees it
            self.clients.end_rollout(attempt.request.base_url, attempt.request.rollout_id)

    async def _turns(self, attempt: _Attempt) -> None:
        request = attempt.request
        env = self.env
        assert isinstance(env, BaseEnv)
        config = self.config
        sink = attempt.sink
        sink.phase = "context"
        known = await self._tools(request.example)
        tool_list = list(known.values())
        client = scoped_client(self.clients.get(request.base_url), role="policy")
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
                if request.model_auth is None:
                    result = await client.chat(body, rollout_id=request.rollout_id)
                else:
                    result = await client.chat(body, rollout_id=request.rollout_id, auth=request.model_auth)
            except ModelError as error:
                attempt.reason = error.reason
                attempt.error = str(error)
                return
            model_seconds = time.perf_counter() - clock
            calls = parse_tool_calls(result.message, turn=turn)
            messages.append(assistant_message(result.message, calls, config.max_content_chars))
            record = functools.partial(_turn_record, attempt.turns, turn, started_at, model_seconds, result)
            if not calls:
                record()
                attempt.reason = turn_end_reason(result.finish_reason)
                if self._env_turns and attempt.reason in _ANSWERED:
                    answer = await self._answer(attempt, turn, plain=True)
                    if answer is not None and not answer.done:
                        attempt.reason = TerminationReason.FINISHED
                        continue
                    if answer is not None:  # the env ended the episode, whatever cut the reply
                        attempt.reason = TerminationReason.FINISHED
                        return
                if attempt.reason == TerminationReason.MODEL_ERROR:
                    attempt.error = f"{_NO_FINISH_REASON} (finish_reason={result.finish_reason!r})"
                elif attempt.reason not in self._scorable:
                    attempt.error = f"the model server ended the turn with finish_reason {attempt.reason!r}"
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
            outcome = await run_tool_calls(
                env,
                request.rollout_id,
                calls,
                known,
                timeout=config.tool_timeout,
                max_chars=config.max_tool_result_chars,
            )
            messages.extend(outcome.messages)
            record(time.perf_counter() - clock, len(calls), outcome.errors)
            if outcome.stop is not None:
                attempt.reason = outcome.stop.reason
                attempt.error = outcome.stop.error
                return
            if self._env_turns:
                answer = await self._answer(attempt, turn, plain=False)
                if answer is not None and answer.done:
                    attempt.reason = TerminationReason.FINISHED
                    return
        attempt.reason = TerminationReason.MAX_TURNS_EXCEEDED

    async def _answer(self, attempt: _Attempt, turn: int, *, plain: bool) -> EnvTurn | None:
        """The env's turn after model turn ``turn``: append its observation, record its reward.

        ``None`` when the env had nothing to add: after a reply without tool calls the
        rollout then ends as without the hook; after tool calls it goes on.
        """
        env = self.env
        assert isinstance(env, BaseEnv)
        attempt.sink.phase = "env"
        answer = await env_turn(
            env,
            self._view(attempt),
            turn=turn,
            plain=plain,
            where=self._env_hook,
            timeout=self.config.env_response_timeout,
            max_chars=self.config.max_tool_result_chars,
        )
        if answer is not None:
            attempt.turns[-1] = with_answer(attempt.turns[-1], answer)
            attempt.messages.extend(answer.messages)
        return answer

    def _view(self, attempt: _Attempt) -> BaseRollout:
        request = attempt.request
        return BaseRollout(
            rollout_id=request.rollout_id,
            termination_reason=attempt.reason,
            rewards=dict(attempt.rewards) if attempt.rewards is not None else None,
            error=attempt.error,
            messages=attempt.messages,
            example_args=attempt.example_args,
            split=request.split,
            example_id=request.example.id,
            turns=tuple(attempt.turns),
        )

    def _outcome(self, attempt: _Attempt) -> RolloutOutcome:
        request = attempt.request
        self._end_trace(attempt)
        scored = goes_to_scoring(attempt.reason, self._scorable, not attempt.scorable)
        return RolloutOutcome(
            rewards=dict(attempt.rewards or {}) if scored else {},
            termination_reason=str(attempt.reason),
            error=attempt.error or None,
            rollout_id=request.rollout_id,
            example_id=request.example.id,
            split=request.split,
            messages=attempt.messages,
            turns=tuple(attempt.turns),
            logs=attempt.sink.freeze(),
            started_at=attempt.started_at,
            ended_at=attempt.ended_at,
            sampling=request.sampling,
            scoring_error=attempt.scoring_error,
            trace_id=attempt.trace_id,
        )


@dataclass(frozen=True, slots=True)
class _BadTools:
    """A tool set that failed its check: kept so an invalid set is checked once too."""

    message: str
