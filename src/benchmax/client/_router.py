"""Several replicas of one model behind one logical endpoint (data-parallel vLLM or SGLang servers).

Each replica keeps its own client: its own connections, its own request limit
and its own health gate. The router only chooses, per request, which replica
sends it:

- a rollout's later turns go to the replica that served its first, while that
  replica is up, so the server's prefix cache holds the conversation so far;
- any other request goes to the replica with the fewest requests outstanding
  (queued for a slot or on the wire), ties taken in turn;
- a replica that is down is routed around: a request whose answer it lost is
  sent to another replica at once, without spending a retry;
- with every replica down, requests wait (the rollout timeout paused) until
  one is back, and fail with :class:`EndpointDown` once every replica is past
  its outage budget.

The router is what ``ClientPool.get`` returns for a logical endpoint (the first
replica's URL), so the engine and everything else above the client call it like
any other :class:`ModelClient`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from benchmax.auth import ModelAuth, redact_url
from benchmax.client._gate import GateEvent, Outage, Unavailable
from benchmax.client._http import HttpModelClient
from benchmax.client._types import ChatResult, EndpointDown
from benchmax.envs import current_scope

logger = logging.getLogger("benchmax.client")

T = TypeVar("T")

STICKY_ROLLOUTS = 32_768
"""Rollouts whose replica the router remembers; the least recently used are forgotten first."""


class ReplicaRouter:
    """Requests for one logical endpoint, spread over its replicas (see the module docstring)."""

    def __init__(self, replicas: Sequence[HttpModelClient], *, sticky_rollouts: int = STICKY_ROLLOUTS) -> None:
        if len(replicas) < 2:
            raise ValueError("a ReplicaRouter needs at least two replicas")
        urls = [replica.base_url for replica in replicas]
        if len(set(urls)) != len(urls):
            raise ValueError(f"the same replica is listed twice: {', '.join(map(redact_url, urls))}")
        self.replicas = tuple(replicas)
        self.base_url = urls[0]
        self.sticky_rollouts = sticky_rollouts
        self.waiting = 0
        """Requests waiting because every replica is down."""
        self.rerouted = 0
        """Requests sent to another replica after theirs went down under them."""
        self.failures: Counter[str] = Counter()
        self._gates = tuple(replica.gate for replica in replicas)
        self._outstanding = [0] * len(replicas)
        self._cursor = 0
        self._sticky: OrderedDict[str, int] = OrderedDict()
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        for gate in self._gates:
            gate.routed = True
            gate.subscribe(self._on_gate)

    def __repr__(self) -> str:
        return f"ReplicaRouter({', '.join(repr(replica.shown_url) for replica in self.replicas)})"

    @property
    def down(self) -> bool:
        """Every replica is down."""
        return all(gate.down for gate in self._gates)

    @property
    def failed(self) -> bool:
        """Every replica is down past its outage budget: requests fail."""
        return all(gate.failed for gate in self._gates)

    def outstanding(self) -> dict[str, int]:
        """Requests each replica has queued or on the wire right now."""
        return {replica.base_url: count for replica, count in zip(self.replicas, self._outstanding, strict=True)}

    async def chat(
        self, body: dict[str, Any], *, rollout_id: str | None = None, auth: ModelAuth | None = None
    ) -> ChatResult:
        return await self._dispatch(
            rollout_id, lambda replica: replica.chat(body, rollout_id=rollout_id, auth=auth, wait=False)
        )

    async def request(
        self,
        method: str,
        path: str,
        parse: Callable[[dict[str, Any]], T],
        body: dict[str, Any] | None = None,
        *,
        auth: ModelAuth | None = None,
    ) -> T:
        """Another route of the servers (``/completions``, ``/models``), routed like ``chat``."""
        return await self._dispatch(
            None, lambda replica: replica.request(method, path, parse, body, auth=auth, wait=False)
        )

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.aclose()

    async def _dispatch(self, rollout_id: str | None, send: Callable[[HttpModelClient], Awaitable[T]]) -> T:
        while True:
            index = self._pick(rollout_id)
            if index is None:
                await self._wait_for_a_replica()
                continue
            self._outstanding[index] += 1
            try:
                return await send(self.replicas[index])
            except Unavailable:
                # The replica went down under this request (its answer, if any, is lost):
                # send it to another one, as if it had never been sent.
                self.rerouted += 1
                self._gates[index].note_rerouted()
            finally:
                self._outstanding[index] -= 1

    def _pick(self, rollout_id: str | None) -> int | None:
        gates = self._gates
        sticky = self._sticky
        if rollout_id is not None:
            index = sticky.get(rollout_id)
            if index is not None and not gates[index].down:
                sticky.move_to_end(rollout_id)
                return index
        outstanding = self._outstanding
        count = len(gates)
        start = self._cursor
        self._cursor = start + 1 if start + 1 < count else 0
        best: int | None = None
        for offset in range(count):
            index = start + offset
            if index >= count:
                index -= count
            if not gates[index].down and (best is None or outstanding[index] < outstanding[best]):
                best = index
        if best is not None and rollout_id is not None:
            sticky[rollout_id] = best
            sticky.move_to_end(rollout_id)
            if len(sticky) > self.sticky_rollouts:
                sticky.popitem(last=False)
        return best

    async def _wait_for_a_replica(self) -> None:
        """Every replica is down: wait, the caller's rollout clock paused, until one is back."""
        if self.failed:
            self.failures["endpoint_down"] += 1
            raise self._down_error()
        for gate in self._gates:
            gate.ensure_probing()
            gate.note_held()
        self.waiting += 1
        clock = current_scope().hold
        if clock is not None:
            clock.pause()
        try:
            while self.down and not self.failed:
                changed = self._event()
                changed.clear()
                await changed.wait()
        finally:
            self.waiting -= 1
            if clock is not None:
                clock.resume()
        if self.down:
            self.failures["endpoint_down"] += 1
            raise self._down_error()

    def _on_gate(self, event: GateEvent, outage: Outage) -> None:
        if self._changed is not None:
            self._changed.set()

    def _event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed = asyncio.Event()
            self._loop = loop
        return self._changed

    def _down_error(self) -> EndpointDown:
        causes = "; ".join(f"{gate.shown}: {gate.outage.cause if gate.outage else 'down'}" for gate in self._gates)
        seconds = min((gate.outage.seconds for gate in self._gates if gate.outage), default=0.0)
        limit = max(gate.max_outage for gate in self._gates)
        return EndpointDown(
            f"all {len(self._gates)} replicas of {redact_url(self.base_url)} down for {seconds:.0f} s ({causes}); "
            f"past the outage budget of {limit:g} s (--max-outage)"
        )
