"""The health gate of one model endpoint: while it is down, requests wait instead of failing.

Model servers go away during long runs (a restart to reload weights, an OOM
kill, a rescheduled pod). A request that fails because the *endpoint* is gone
(nothing listening, connections dropped, every request answered 502/503/504)
says nothing about that request, so it must not spend its retries: the gate
trips, every request to the endpoint waits, one probe at a time checks the
endpoint with capped exponential backoff, and all resume when it answers. A
request whose answer was lost is simply sent again: the transcript only grows
on an answer, so it stays consistent. Failures of one request (a 500 for this
body, a malformed reply, a 429) take the per-request retry path instead.

Past ``max_outage`` seconds down, the waiting requests fail with
:class:`EndpointDown` and new ones fail at once, until the endpoint answers a
probe again. Each outage is kept as an :class:`Outage` record; listeners hear
of every change (the live progress and the run store use them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from benchmax.client._types import EndpointDown

logger = logging.getLogger("benchmax.client")

DEFAULT_MAX_OUTAGE = 600.0
"""Seconds an endpoint may stay down before the requests it holds fail (``--max-outage``)."""

GateEvent = Literal["down", "up", "failed"]
Probe = Callable[[], Awaitable[bool]]

class HoldClock(Protocol):
    """A caller's clock that stops while its requests wait for a down endpoint (the engine's rollout timeout)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


ON_HOLD: ContextVar[HoldClock | None] = ContextVar("benchmax_on_hold", default=None)
"""The clock of the current task, paused while one of its requests waits at a gate."""


@dataclass(frozen=True, slots=True)
class Outage:
    """One stretch of time an endpoint was down."""

    endpoint: str
    started_at: float
    cause: str
    ended_at: float | None = None
    held: int = 0
    """Requests that waited for the endpoint during the outage."""
    failed: bool = False
    """Whether the outage outlasted the budget (the held requests failed)."""

    @property
    def seconds(self) -> float:
        return (self.ended_at or time.time()) - self.started_at


class EndpointGate:
    """Up or down for one endpoint; ``admit()`` returns at once while up and waits while down.

    ``probe`` answers whether the endpoint is back (``None``: someone else
    decides, through :meth:`hold` and :meth:`release`, as the embedded model's
    supervisor does). ``trip_after`` consecutive endpoint failures trip the
    gate; a definitive one (connection refused) trips it at once.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        probe: Probe | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
        trip_after: int = 3,
        probe_initial: float = 0.25,
        probe_max: float = 10.0,
    ) -> None:
        if not max_outage > 0:
            raise ValueError(f"max_outage must be > 0 seconds, got {max_outage!r}")
        self.endpoint = endpoint
        self.max_outage = max_outage
        self.trip_after = trip_after
        self.probe_initial = probe_initial
        self.probe_max = probe_max
        self.outages: list[Outage] = []
        self.waiting = 0
        self._probe = probe
        self._failures = 0
        self._current: Outage | None = None
        self._failed = False
        self._message = ""
        self._held = False
        self._opened: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._checking: asyncio.Future[bool] | None = None
        self._down_clock = 0.0
        self._probation = False
        self._listeners: list[Callable[[GateEvent, Outage], None]] = []

    def __repr__(self) -> str:
        return f"EndpointGate({self.endpoint!r}, {'down' if self.down else 'up'})"

    @property
    def down(self) -> bool:
        return self._current is not None

    @property
    def outage(self) -> Outage | None:
        """The outage in progress, if any."""
        return self._current

    def all_outages(self) -> list[Outage]:
        """Every outage so far, the one in progress (``ended_at`` None) last."""
        return [*self.outages, *([self._current] if self._current is not None else [])]

    def subscribe(self, listener: Callable[[GateEvent, Outage], None]) -> None:
        self._listeners.append(listener)

    async def admit(self) -> None:
        """Return once a request may be sent; raise :class:`EndpointDown` past the outage budget."""
        if self._current is None:
            return
        if self._failed:
            raise self._down_error()
        opened = self._event()
        self.waiting += 1
        self._current = replace(self._current, held=self._current.held + 1)
        clock = ON_HOLD.get()
        if clock is not None:
            clock.pause()
        try:
            while self._current is not None and not self._failed:
                await opened.wait()
                opened = self._event()
        finally:
            self.waiting -= 1
            if clock is not None:
                clock.resume()
        if self._failed:
            raise self._down_error()

    async def failure(self, cause: str, *, definitive: bool = False) -> bool:
        """A request failed in a way that may be the endpoint's; returns whether the endpoint is down.

        Nothing listening is down at once; so are ``trip_after`` such failures in a row, or
        one right after an outage. Otherwise one probe (shared by the requests failing at the
        same moment) tells a dead endpoint from one request's bad luck, before that request
        spends a retry.
        """
        if self._current is not None:
            return True
        self._failures += 1
        if definitive or self._probation or self._failures >= self.trip_after:
            self._trip(cause, probe=True)
            return True
        if self._probe is not None and not await self._probe_once():
            if self._current is None:
                self._trip(cause, probe=True)
            return True
        return self._current is not None

    async def _probe_once(self) -> bool:
        if self._checking is None or self._checking.done():
            assert self._probe is not None
            self._checking = asyncio.ensure_future(self._probe())
        try:
            return await asyncio.shield(self._checking)
        except Exception:
            return False

    def success(self) -> None:
        """The endpoint answered a request: it is up."""
        self._failures = 0
        self._probation = False
        if self._current is not None and not self._held:
            self._recover()

    def hold(self, cause: str) -> None:
        """Take the endpoint down from outside (its process died); :meth:`release` brings it back."""
        self._held = True
        if self._current is None:
            self._trip(cause, probe=False)
        else:
            # A request saw the process go first; the supervisor knows why.
            self._current = replace(self._current, cause=cause)

    def release(self) -> None:
        self._held = False
        self._failures = 0
        self._probation = False
        if self._current is not None:
            self._recover()

    def fail(self, message: str) -> None:
        """End the outage in failure now: held and new requests raise :class:`EndpointDown`."""
        if self._current is None:
            self._trip(message, probe=False)
        self._fail_outage(message)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # Internals.

    def _event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._opened is None or self._loop is not loop:
            self._opened = asyncio.Event()
            self._loop = loop
        return self._opened

    def _trip(self, cause: str, *, probe: bool) -> None:
        self._current = Outage(self.endpoint, started_at=time.time(), cause=cause)
        if not self._probation:
            # An endpoint that answers probes but fails every request again keeps
            # the clock of its first outage, so it cannot hold requests forever.
            self._down_clock = time.monotonic()
        self._failed = False
        self._event().clear()
        logger.warning("model endpoint %s is down (%s); holding its requests", self.endpoint, cause)
        self._emit("down", self._current)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._watch(probe), name=f"benchmax-gate-{self.endpoint}"
            )

    async def _watch(self, probe: bool) -> None:
        """Probe the endpoint (one probe at a time, capped backoff) and enforce the outage budget."""
        delay = self.probe_initial
        while self._current is not None:
            left = self.max_outage - (time.monotonic() - self._down_clock)
            if left <= 0 and not self._failed:
                self._fail_outage(
                    f"endpoint {self.endpoint} down for {time.monotonic() - self._down_clock:.0f} s "
                    f"({self._current.cause}); past the outage budget of {self.max_outage:g} s (--max-outage)"
                )
            await asyncio.sleep(min(delay, left) if left > 0 else delay)
            if self._current is None:
                return
            if probe and self._probe is not None and not self._held:
                try:
                    back = await self._probe()
                except Exception:
                    back = False
                if back:
                    self._recover()
                    self._probation = True
                    return
            delay = min(self.probe_max, delay * 2)

    def _fail_outage(self, message: str) -> None:
        if self._current is None or self._failed:
            return
        self._failed = True
        self._message = message
        self._current = replace(self._current, failed=True)
        logger.error("%s; %d requests fail", message, self.waiting)
        self._emit("failed", self._current)
        self._event().set()

    def _recover(self) -> None:
        outage = self._current
        if outage is None:
            return
        ended = replace(outage, ended_at=time.time())
        self.outages.append(ended)
        self._current = None
        self._failed = False
        self._failures = 0
        logger.warning(
            "model endpoint %s is back after %.1f s; %d held requests resume", self.endpoint, ended.seconds, ended.held
        )
        self._emit("up", ended)
        self._event().set()

    def _down_error(self) -> EndpointDown:
        return EndpointDown(self._message or f"endpoint {self.endpoint} is down")

    def _emit(self, event: GateEvent, outage: Outage) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, outage)
            except Exception:
                logger.exception("a listener of %s's gate failed", self.endpoint)
