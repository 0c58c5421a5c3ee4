"""Where groups run: in this process (the default) or on a pool of Ray actors.

The runner and rescore only see this interface, so scheduling, store writes,
zero-fill and progress are identical whichever executor runs the groups: a run
sends groups to ``run_group``, a rescore sends stored groups to ``rescore_group``.
Rollouts in flight are counted by each executor's :class:`RolloutSlots` (``slots``),
in rollouts: the one limit of ``--concurrency``, in process and on Ray alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, Protocol

from benchmax.client import CacheSettings, CallLedger, ClientPool, PoolStats, PriceTable
from benchmax.engine import Engine, EngineConfig, GroupResult, StoredRollout
from benchmax.envs import Environment, RolloutFailure, RolloutOutcome, RolloutRequest, TerminationReason, implements
from benchmax.mix import EnvMix, MixError

logger = logging.getLogger("benchmax.runner")


class GroupExecutor(Protocol):
    slots: RolloutSlots
    """The executor's limit on rollouts in flight (``--concurrency``), held by every group it runs."""

    async def start(self) -> None: ...

    async def run_group(self, requests: Sequence[RolloutRequest[Any]]) -> GroupResult: ...

    async def rescore_group(
        self, requests: Sequence[RolloutRequest[Any]], stored: Sequence[StoredRollout]
    ) -> GroupResult: ...

    def stats(self) -> dict[str, Any]: ...

    def totals(self) -> PoolStats:
        """The model-client counters as one record (what ``stats`` writes as JSON)."""
        ...

    async def aclose(self) -> None: ...


class LocalExecutor:
    """Groups run on this event loop, through the engine (or an env's own ``run_group``).

    Each group runs inside a scope of the executor's :class:`CallLedger`, so its
    model calls (the policy's and any judge's) are counted, priced with
    ``prices`` and answered from the response cache when ``cache`` is set; the
    group's result carries them (``GroupResult.calls``).

    A mixture (:class:`~benchmax.mix.EnvMix`) gets one engine per member, all on
    one client pool and one ledger, so retries, the outage gate, replicas, the
    cache and the cost are the run's whatever env a group is of; each group goes to
    its member's engine (by ``example.env``) with the member's own example, and its
    outcomes come back under the mixture's example id.
    """

    def __init__(
        self,
        env: Environment[Any, Any],
        config: EngineConfig | None = None,
        *,
        clients: ClientPool | None = None,
        prices: PriceTable | None = None,
        cache: CacheSettings | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.env = env
        self.slots = RolloutSlots(concurrency)
        self.ledger = CallLedger(prices=prices, cache=cache)
        self._mix = env if isinstance(env, EnvMix) else None
        if self._mix is None:
            self.engine = Engine(env, config, clients=clients)
            self._routes: dict[str, tuple[Engine, bool]] = {}
        else:
            pool = clients or (config or EngineConfig()).client_pool()
            self._routes = {
                member.name: (Engine(member.env, config, clients=pool), implements(member.env, "run_group"))
                for member in self._mix.members
            }
            self.engine = next(iter(self._routes.values()))[0]
        self._own_group = self._mix is None and implements(env, "run_group")

    @property
    def clients(self) -> ClientPool:
        return self.engine.clients

    async def start(self) -> None:
        await asyncio.to_thread(self.ledger.open)
        if self._mix is None:
            await self.engine.start()
            return
        for name, (engine, _) in self._routes.items():  # each member's tools checked by its own engine
            try:
                await engine.start()
            except Exception as exc:
                raise MixError(f"env {name!r}: {exc}") from exc

    async def run_group(self, requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
        async with self.slots.hold(len(requests)):
            return await self._run_group(requests)

    async def _run_group(self, requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
        with self.ledger.group() as meter:
            if self._mix is not None:
                result = await self._member_group(requests)
            elif self._own_group:
                result = await run_own_group(self.env, requests)
            else:
                result = await self.engine.run_group(requests)
        return replace(result, calls=meter.log())

    async def _member_group(self, requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
        assert self._mix is not None
        member, routed = self._mix.route(requests)
        engine, own_group = self._routes[member.name]
        result = await (run_own_group(member.env, routed) if own_group else engine.run_group(routed))
        return self._unrouted(result, requests)

    def _unrouted(self, result: GroupResult, requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
        assert self._mix is not None
        return replace(result, outcomes=tuple(self._mix.unroute(outcome, requests) for outcome in result.outcomes))

    async def rescore_group(
        self, requests: Sequence[RolloutRequest[Any]], stored: Sequence[StoredRollout]
    ) -> GroupResult:
        """Stored transcripts scored again by the env's reward code; a judge's calls counted as in ``run_group``."""
        async with self.slots.hold(len(requests)):
            return await self._rescore_group(requests, stored)

    async def _rescore_group(
        self, requests: Sequence[RolloutRequest[Any]], stored: Sequence[StoredRollout]
    ) -> GroupResult:
        with self.ledger.group() as meter:
            if self._mix is not None:
                member, routed = self._mix.route(requests)
                engine = self._routes[member.name][0]
                result = self._unrouted(await engine.rescore_group(routed, stored), requests)
            else:
                result = await self.engine.rescore_group(requests, stored)
        return replace(result, calls=meter.log())

    def stats(self) -> dict[str, Any]:
        """The clients' counters, and every model call so far under ``calls`` (per role and model)."""
        return self.totals().to_json()

    def totals(self) -> PoolStats:
        """The clients' counters with every model call so far: what a Ray actor sends back to the driver."""
        return replace(self.engine.clients.totals(), calls=self.ledger.totals())

    async def aclose(self) -> None:
        try:
            await self.engine.aclose()  # the members' engines share its client pool: closed once
        finally:
            await asyncio.to_thread(self.ledger.close)


_HELD: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar("benchmax_held_slots", default=frozenset())
"""The limiters (by ``id``) whose slots the running task holds for its group already."""


class RolloutSlots:
    """Rollouts in flight, counted in rollouts whoever starts groups: a group takes as many
    slots as it has siblings and starts only when they all fit, so groups are never split.

    The one limit of ``--concurrency``: each executor holds one (``executor.slots``) and every
    group it runs holds its slots, in process or on Ray actors. A caller that starts groups (the
    run loop) claims a group's slots before starting it (:meth:`claim`, so no task is started
    that would have to wait), and the executor's own :meth:`hold` inside that claim takes nothing
    more. A group larger than the limit still runs, alone, rather than never: at most
    ``max(limit, group size)`` rollouts run at once. ``limit=None``: no limit (an executor whose
    caller bounds its groups itself).
    """

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"concurrency must be >= 1 rollouts, got {limit}")
        self.limit = limit
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def claim(self, count: int) -> SlotClaim:
        """Wait until a group of ``count`` rollouts fits, and take its slots for the task that runs
        it: that task enters the claim (``async with claim:``), which gives the slots back."""
        count = min(count, self.limit) if self.limit is not None else 0
        while count and self.used + count > (self.limit or 0):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        self.used += count
        return SlotClaim(self, count)

    def _release(self, count: int) -> None:
        """Give ``count`` slots back, at once (no await: a cancelled group gives them back too)."""
        if count:
            self.used -= count
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)

    @contextlib.asynccontextmanager
    async def hold(self, count: int) -> AsyncIterator[None]:
        """The group's slots for the body: taken here, or already by the caller's :meth:`claim`."""
        if id(self) in _HELD.get():
            yield
            return
        async with await self.claim(count):
            yield


class SlotClaim:
    """A group's slots taken by :meth:`RolloutSlots.claim`, given back once, when the group ends."""

    def __init__(self, slots: RolloutSlots, count: int) -> None:
        self._slots = slots
        self._count = count
        self._token: contextvars.Token[frozenset[int]] | None = None

    async def __aenter__(self) -> SlotClaim:
        self._token = _HELD.set(_HELD.get() | {id(self._slots)})
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._token is not None:
            _HELD.reset(self._token)
            self._token = None
        self.release()

    def release(self) -> None:
        """Give the slots back (also for a group claimed but never started); only the first call counts."""
        count, self._count = self._count, 0
        self._slots._release(count)


async def run_own_group(env: Environment[Any, Any], requests: Sequence[RolloutRequest[Any]]) -> GroupResult:
    """An env's own ``run_group``; an exception fails the group (``harness_error``), never the run."""
    now = time.time()
    try:
        outcomes = await env.run_group(requests)
        return GroupResult(tuple(outcomes[request.rollout_id] for request in requests))
    except Exception as exc:
        reason = exc.termination_reason if isinstance(exc, RolloutFailure) else TerminationReason.HARNESS_ERROR
        logger.exception("%s.run_group failed", type(env).__name__)
        return failed_group(requests, reason, f"{type(exc).__name__}: {exc}", started_at=now)


def failed_group(
    requests: Sequence[RolloutRequest[Any]], reason: str, error: str, *, started_at: float
) -> GroupResult:
    """A group whose siblings all end with ``reason``: it could not be run at all."""
    return GroupResult(
        tuple(
            RolloutOutcome(
                rewards={},
                termination_reason=reason,
                error=error,
                rollout_id=request.rollout_id,
                example_id=request.example.id,
                split=request.split,
                messages=[dict(m) for m in _prompt(request)],
                started_at=started_at,
                ended_at=time.time(),
                sampling=request.sampling,
            )
            for request in requests
        )
    )


def _prompt(request: RolloutRequest[Any]) -> list[Any]:
    payload = request.example.payload
    return list(payload.get("prompt_messages") or []) if isinstance(payload, dict) else []
