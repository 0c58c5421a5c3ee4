"""``AgentEnv``: an agent program the author already has, run as an env.

The author gives the program (an async function, or a command in any language)
plus a dataset and a reward, exactly as for ``BaseEnv``. Per rollout benchmax
enters ``rollout_context``, takes a lease of a recording proxy in front of the
run's model (the engine's own client pool: retries, the outage gate, a trainer's
policy), runs the program with the lease's base URL and key, and turns the calls
the proxy recorded into the rollout: turns with their sequences, the transcript,
the program's log lines. ``compute_reward`` then scores it inside the context, and
``compute_group_rewards`` scores the group, as for an engine rollout.

The budgets are enforced at the proxy, where the agent sees them: ``max_calls``
model calls (the next one gets HTTP 429, and the rollout ends
``max_turns_exceeded``, a scored budget stop) and the time budget (calls are
refused and the program is killed; the rollout ends ``timeout``). A program that
fails ends ``agent_error`` with its error or stderr tail. Whatever happens, the
calls made before are kept in the rollout.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import orjson

from benchmax.agents._run import AgentFunction, AgentRun, command_env, run_command, run_function
from benchmax.agents._sandboxed import run_in_sandbox
from benchmax.agents._transcript import calls_to_turns, transcript
from benchmax.auth import request_secrets
from benchmax.client import ClientPool
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    EnvDefinitionError,
    Example,
    JsonRow,
    ModelRequestContext,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
    TerminationReason,
    current_scope,
    settle_termination_reason,
)
from benchmax.proxy import ProxyLease, RecordedCall, RecordingProxy

logger = logging.getLogger("benchmax.agents")

AGENT_ERROR = "agent_error"
"""The termination reason of a rollout whose agent program raised or exited non-zero
(an operational failure: no reward components; the error says why)."""

DEFAULT_TIMEOUT = 600.0
"""Seconds an agent may run when neither the env nor the run sets a limit."""


class AgentEnv(BaseEnv):
    """An agent program as an env: give ``agent`` (an async function) or ``command`` (argv or a shell-style string).

    ``agent(example, base_url, api_key)`` gets the example's payload and returns its
    final answer; a ``command`` reads the payload as JSON on stdin, finds the
    endpoint in ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` and prints its final answer
    on stdout. ``max_calls`` bounds its model calls, ``timeout`` its seconds (by
    default the run's ``--rollout-timeout`` less a reserve for scoring, else 600).
    ``sandbox=True`` (or a :class:`benchmax.sandbox.SandboxSpec`) runs the command
    in a bubblewrap sandbox whose only way out is the proxy.
    """

    max_turns = 1
    """Unused by agents (the program runs its own loop); ``max_calls`` bounds its model calls."""
    agent: AgentFunction | None = None
    command: Sequence[str] | str | None = None
    command_env: Mapping[str, str] = {}
    """Variables the command sees besides ``PATH``, ``HOME``, the locale and the endpoint's."""
    max_calls: int | None = 32
    timeout: float | None = None
    sandbox: Any = False
    max_answer_chars: int = 100_000
    max_stderr_chars: int = 16_000

    def __init__(
        self,
        *,
        agent: AgentFunction | None = None,
        command: Sequence[str] | str | None = None,
        max_calls: int | None = None,
        timeout: float | None = None,
        sandbox: Any = None,
    ) -> None:
        super().__init__()
        if agent is not None:
            self.agent = agent
        if command is not None:
            self.command = command
        if max_calls is not None:
            self.max_calls = max_calls
        if timeout is not None:
            self.timeout = timeout
        if sandbox is not None:
            self.sandbox = sandbox
        self._check()
        self._proxies: dict[tuple[Any, ...], RecordingProxy] = {}
        self._own_clients: ClientPool | None = None
        self._lock = asyncio.Lock()

    def _check(self) -> None:
        name = type(self).__name__
        if (self.agent is None) == (self.command is None):
            raise EnvDefinitionError(f"{name} needs exactly one of agent= (an async function) or command= (argv)")
        if self.agent is not None and not callable(self.agent):
            raise EnvDefinitionError(f"{name}.agent must be an async function (example, base_url, api_key) -> answer")
        if self.command is not None and not self.argv():
            raise EnvDefinitionError(f"{name}.command is empty")
        if self.agent is not None and self.sandbox:
            raise EnvDefinitionError(
                f"{name}: sandbox= runs a command; an in-process agent function cannot be sandboxed"
            )
        if self.max_calls is not None and (isinstance(self.max_calls, bool) or self.max_calls < 0):
            raise EnvDefinitionError(f"{name}.max_calls must be an int >= 0 or None, got {self.max_calls!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise EnvDefinitionError(f"{name}.timeout must be > 0 seconds or None, got {self.timeout!r}")

    def argv(self) -> list[str]:
        command = self.command
        if command is None:
            return []
        return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]

    def time_budget(self) -> float:
        """The agent's seconds: the env's ``timeout``, within the run's rollout limit less a reserve
        (a tenth, 1 to 10 s) so the engine's own deadline never cuts the rollout before its calls are kept."""
        engine = current_scope().engine
        limit = getattr(getattr(engine, "config", None), "rollout_timeout", None)
        budget = self.timeout if self.timeout is not None else DEFAULT_TIMEOUT
        if limit:
            budget = min(budget, limit - min(max(limit / 10, 1.0), 10.0)) if limit > 2.0 else min(budget, limit / 2)
        return budget

    # One rollout.

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout | RolloutOutcome:  # type: ignore[override]
        payload = request.example.payload
        example_args = {key: value for key, value in payload.items() if key != "prompt_messages"}
        async with self.rollout_context(request.rollout_id, request.example):
            proxy = await self._proxy(request)
            budget = self.time_budget()
            async with proxy.lease(
                request.rollout_id, max_calls=self.max_calls, timeout=budget, sampling=request.sampling
            ) as lease:
                run = await self._run(request, lease, budget)
                calls = lease.calls
                stop = lease.stop_reason
            ended = time.time()
            reason, error = _settle(run, stop, calls)
            rollout = BaseRollout(
                rollout_id=request.rollout_id,
                termination_reason=reason,
                error=error,
                messages=transcript(
                    payload.get("prompt_messages") or (), calls, run.answer, max_chars=_max_content_chars()
                ),
                example_args=example_args,
                split=request.split,
                example_id=request.example.id,
                turns=calls_to_turns(calls, ended),
            )
            return await self._score(rollout)

    async def _run(self, request: RolloutRequest[JsonRow], lease: ProxyLease, budget: float) -> AgentRun:
        payload = request.example.payload
        secrets = await _model_secrets(request)
        if self.agent is not None:
            run = await run_function(
                self.agent, payload, lease.base_url, lease.api_key, timeout=budget, max_answer=self.max_answer_chars
            )
            return run.masked(secrets)
        stdin = orjson.dumps(payload, default=str)
        if self.sandbox:
            return await run_in_sandbox(
                self.sandbox,
                self.argv(),
                stdin,
                lease,
                dict(self.command_env),
                timeout=budget,
                max_answer=self.max_answer_chars,
                max_stderr=self.max_stderr_chars,
                secrets=secrets,
            )
        env = command_env(lease.base_url, lease.api_key, request.rollout_id, self.command_env)
        return await run_command(
            self.argv(),
            stdin,
            env,
            timeout=budget,
            max_answer=self.max_answer_chars,
            max_stderr=self.max_stderr_chars,
            secrets=secrets,
        )

    async def _score(self, rollout: BaseRollout) -> BaseRollout | RolloutOutcome:
        """``compute_reward`` for a scorable rollout, inside its context; a failing reward keeps the rollout."""
        if rollout.termination_reason not in self.scorable_termination_reasons or type(self).compute_reward is (
            BaseEnv.compute_reward
        ):
            return rollout
        try:
            rewards = await self.compute_reward(rollout)
        except RolloutFailure as exc:
            logger.error("compute_reward failed: %s (%s)", exc.message, exc.termination_reason)
            reason = settle_termination_reason(rollout.termination_reason, exc.termination_reason)
            return _unscored(rollout, reason, exc.message)
        except Exception as exc:
            logger.exception("compute_reward raised %s", type(exc).__name__)
            return _unscored(rollout, rollout.termination_reason, f"compute_reward raised {type(exc).__name__}: {exc}")
        return BaseRollout(
            rollout_id=rollout.rollout_id,
            termination_reason=rollout.termination_reason,
            rewards=dict(rewards) if isinstance(rewards, Mapping) else rewards,
            error=rollout.error,
            messages=rollout.messages,
            example_args=rollout.example_args,
            split=rollout.split,
            example_id=rollout.example_id,
            turns=rollout.turns,
        )

    # The proxy in front of the run's model, one per endpoint.

    async def _proxy(self, request: RolloutRequest[JsonRow]) -> RecordingProxy:
        engine = current_scope().engine
        clients = getattr(engine, "clients", None)
        async with self._lock:
            if clients is None:
                if self._own_clients is None:
                    self._own_clients = ClientPool()
                clients = self._own_clients
            key = (clients, request.base_url, request.model, request.model_auth)
            proxy = self._proxies.get(key)
            if proxy is None:
                proxy = RecordingProxy(clients, model=request.model, base_url=request.base_url, auth=request.model_auth)
                await proxy.start()
                self._proxies[key] = proxy
        return proxy

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example[JsonRow]) -> AsyncIterator[None]:
        yield

    async def aclose(self) -> None:
        proxies, self._proxies = list(self._proxies.values()), {}
        for proxy in proxies:
            await proxy.aclose()
        if self._own_clients is not None:
            await self._own_clients.aclose()
            self._own_clients = None
        await super().aclose()


def _max_content_chars() -> int | None:
    """The run's ``--max-content-chars`` (the engine's config), when an engine runs this rollout."""
    limit = getattr(getattr(current_scope().engine, "config", None), "max_content_chars", None)
    return limit if isinstance(limit, int) and limit > 0 else None


async def _model_secrets(request: RolloutRequest[JsonRow]) -> list[str]:
    """The run's model credentials as its requests send them: what must never come back from the agent."""
    if request.model_auth is None:
        return []
    context = ModelRequestContext(base_url=request.base_url or "", model=request.model, rollout_id=request.rollout_id)
    try:
        headers = await request.model_auth.headers_for_request(context)
    except Exception as exc:  # the proxy's own call will fail the same way, and say so
        logger.warning("could not read the run's model credentials to mask them: %s", type(exc).__name__)
        return []
    return request_secrets(headers)


def _settle(run: AgentRun, stop: str | None, calls: Sequence[RecordedCall]) -> tuple[str, str | None]:
    """The rollout's reason: a budget the proxy enforced outranks what the agent did about it
    (it saw the refusal); then the agent's own timeout or failure, a model error behind it included."""
    if stop is not None:
        detail = f" ({run.error})" if run.error else ""
        if stop == TerminationReason.TIMEOUT:
            return stop, f"the rollout's time budget ran out after {len(calls)} model calls{detail}"
        return stop, f"the agent asked for more model calls than its budget of {len(calls)} allows{detail}"
    if run.status == "timeout":
        return TerminationReason.TIMEOUT, run.error
    if run.status == "error":
        failed = [call for call in calls if call.error_reason is not None]
        if failed and failed[-1].error_reason != TerminationReason.CANCELLED:
            return failed[-1].error_reason or TerminationReason.MODEL_ERROR, f"{failed[-1].error} (then {run.error})"
        return AGENT_ERROR, run.error
    return TerminationReason.FINISHED, None


def _unscored(rollout: BaseRollout, reason: str, message: str) -> RolloutOutcome:
    """The rollout with its scoring failure: the engine settles it (``reward_error`` for a clean finish)."""
    return RolloutOutcome(
        rewards={},
        termination_reason=reason,
        error=rollout.error,
        rollout_id=rollout.rollout_id,
        example_id=rollout.example_id,
        split=rollout.split,
        messages=list(rollout.messages),
        turns=tuple(rollout.turns),
        scoring_error=message,
    )
