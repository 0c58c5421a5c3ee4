"""The health gate of one model endpoint: while it is down, requests wait instead of failing.

Model servers go away during long runs (a restart to reload weights, an OOM
kill, a rescheduled pod). A request that fails because the *endpoint* is gone
(nothing listening, connections dropped, every request answered 5xx) says
nothing about that request, so it must not spend its retries: the gate trips,
every request to the endpoint waits, one probe at a time checks the endpoint
with capped exponential backoff, and all resume when it answers. A request
whose answer was lost is simply sent again: the transcript only grows on an
answer, so it stays consistent. Failures of one request (one 500, a malformed
reply, a 429) take the per-request retry path instead.

How a failure is read (its :data:`FailureKind`):

================ ============================================= ======================================
kind             what                                          rule
================ ============================================= ======================================
``refused``      connection refused, DNS failure, no route     down at once
``dropped``      connection reset or closed mid-reply          a probe decides; down after
                                                               ``trip_after`` in a row
``gateway``      502/503/504 without ``Retry-After``           as ``dropped``
``server_error`` any other 5xx without ``Retry-After``         down after ``trip_after`` requests in a
                                                               row (no probe: ``/models`` may answer)
``timeout``      no reply, or no connection, in time           a probe decides; not counted
================ ============================================= ======================================

"In a row" is across all requests to the endpoint: any answer resets it. A
``server_error`` counts once per request: one request that fails again and
again with a 500 (its body trips a server bug) is that request's failure, and
takes the retry path to its end; several requests failing so are the
endpoint's. After an outage the endpoint is on probation until it answers a
request (for at most ``probation`` seconds): if a request fails first with a
``dropped`` or ``gateway`` failure (or a ``server_error`` after an outage that
server errors began: it answers probes but not requests), or it flaps, the
same outage goes on,
with the probe backoff and the outage clock where they were, so a half-alive
endpoint can neither be hammered nor hold requests forever.

Past ``max_outage`` seconds down, the waiting requests fail with
:class:`EndpointDown` and new ones fail at once, until the endpoint answers a
probe again. The budget is a ceiling on any request's wait: it counts from the
probe that found the endpoint down, and a probe that hangs is cut off where the
budget ends. Who sets it: ``--max-outage`` for ``benchmax eval``,
``EngineConfig.max_outage`` for a trainer calling ``Engine.run_group``.

Each outage is kept as an :class:`Outage` record; listeners hear
of every change (the live progress, the run store and the replica router use
them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

from benchmax.auth import redact_url
from benchmax.client._types import EndpointDown
from benchmax.envs import current_scope

logger = logging.getLogger("benchmax.client")

DEFAULT_MAX_OUTAGE = 600.0
"""Seconds an endpoint may stay down before the requests it holds fail (``--max-outage``)."""

GateEvent = Literal["down", "up", "failed"]
FailureKind = Literal["refused", "dropped", "gateway", "server_error", "timeout"]
Probe = Callable[[], Awaitable[bool]]

_PROBED: frozenset[str] = frozenset({"dropped", "gateway", "timeout"})
_ON_PROBATION: frozenset[str] = frozenset({"dropped", "gateway"})


class Unavailable(Exception):
    """The endpoint is down and the caller asked not to wait (the replica router sends elsewhere)."""


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
    rerouted: int = 0
    """Requests sent to another replica instead (see :class:`ReplicaRouter`)."""
    error: str | None = None
    """What the held requests failed with, once the outage outlasted the budget."""

    @property
    def seconds(self) -> float:
        return (self.ended_at or time.time()) - self.started_at


class EndpointGate:
    """Up or down for one endpoint; ``admit()`` returns at once while up and waits while down.

    ``probe`` answers whether the endpoint is back (``None``: someone else
    decides, through :meth:`hold` and :meth:`release`, as the embedded model's
    supervisor does). ``trip_after`` endpoint failures in a row trip the gate;
    the table in the module docstring says which failures count.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        probe: Probe | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
        trip_after: int = 3,
        probe_initial: float = 0.25,
        probe_max: float = 5.0,
        probation: float = 30.0,
    ) -> None:
        if not max_outage > 0:
            raise ValueError(f"max_outage must be > 0 seconds, got {max_outage!r}")
        if trip_after < 1:
            raise ValueError(f"trip_after must be >= 1, got {trip_after!r}")
        self.endpoint = endpoint
        """The endpoint's URL, as its client has it: what its outages are matched by."""
        self.shown = redact_url(endpoint)
        """The URL fit to print (credential parameters masked): what every message of the gate says."""
        self.max_outage = max_outage
        self.trip_after = trip_after
        self.probe_initial = probe_initial
        self.probe_max = probe_max
        self.probation = probation
        self.outages: list[Outage] = []
        self.waiting = 0
        self.routed = False
        """One replica of several: while it is down its requests go to the others (said so in the log)."""
        self._probe = probe
        self._failures = 0
        self._failing: list[object] = []
        """The requests whose server errors count in the current run of failures (once each)."""
        self._tripped_by: str = ""
        self._current: Outage | None = None
        self._failed = False
        self._message = ""
        self._held = False
        self._opened: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._checking: asyncio.Future[bool] | None = None
        self._down_clock = 0.0
        self._delay = probe_initial
        self._probation: Outage | None = None
        """The outage just ended, until the endpoint answers a request: a failure before that reopens it."""
        self._probation_until = 0.0
        self._listeners: list[Callable[[GateEvent, Outage], None]] = []

    def __repr__(self) -> str:
        return f"EndpointGate({self.shown!r}, {'down' if self.down else 'up'})"

    @property
    def down(self) -> bool:
        return self._current is not None

    @property
    def failed(self) -> bool:
        """Down past the outage budget: requests fail at once until a probe says it is back."""
        return self._current is not None and self._failed

    @property
    def outage(self) -> Outage | None:
        """The outage in progress, if any."""
        return self._current

    def all_outages(self) -> list[Outage]:
        """Every outage so far, the one in progress (``ended_at`` None) last."""
        return [*self.outages, *([self._current] if self._current is not None else [])]

    def subscribe(self, listener: Callable[[GateEvent, Outage], None]) -> None:
        self._listeners.append(listener)

    async def admit(self, *, wait: bool = True, seen: float | None = None) -> float | None:
        """Return once a request may be sent; raise :class:`EndpointDown` past the outage budget.

        ``wait=False`` raises :class:`Unavailable` instead (past the budget too: the
        caller, a replica router, decides). ``seen``
        is the start of an outage this request already waited in, so a request
        held twice by one outage counts once. Returns the start of the outage
        waited in, if any.
        """
        outage = self._current
        if outage is None:
            return None
        self._ensure_watch()
        if not wait:
            raise Unavailable(self.shown)
        if self._failed:
            raise self._down_error()
        opened = self._event()
        self.waiting += 1
        if seen != outage.started_at:
            self._current = replace(outage, held=outage.held + 1)
        clock = current_scope().hold
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
        return outage.started_at

    async def failure(self, cause: str, kind: FailureKind = "dropped", *, request: object = None) -> bool:
        """A request failed in a way that may be the endpoint's; returns whether the endpoint is down.

        When it is, the request waits (or is sent elsewhere) and is sent again,
        without spending a retry. Otherwise it takes the per-request retry path.
        ``request`` names the request (any object, the same for each of its
        attempts), so its server errors count once.
        """
        if self._current is not None:
            return True
        if kind == "server_error":
            if request is None or not any(known is request for known in self._failing):
                self._failing.append(request if request is not None else object())
                self._failures += 1
        elif kind != "timeout":
            self._failures += 1
        on_probation = self._on_probation() and (
            kind in _ON_PROBATION or (kind == "server_error" and self._tripped_by == "server_error")
        )
        if kind == "refused" or on_probation or (kind != "timeout" and self._failures >= self.trip_after):
            if not on_probation:  # a reopened outage keeps what began it
                self._tripped_by = kind
            self._trip(cause)
            return True
        if kind in _PROBED and self._probe is not None:
            asked = time.monotonic()
            if not await self._probe_once():
                if self._current is None:
                    # The request has waited since the probe went out: that is the outage's start.
                    self._tripped_by = kind
                    self._trip(cause, since=asked)
                return True
        return self._current is not None

    def success(self) -> None:
        """The endpoint answered a request: it is up, and off probation."""
        self._failures = 0
        self._failing.clear()
        if self._current is not None and not self._held:
            self._recover()
        self._probation = None

    def note_rerouted(self) -> None:
        """A request meant for this endpoint went to another replica while it was down."""
        if self._current is not None:
            self._current = replace(self._current, rerouted=self._current.rerouted + 1)

    def note_held(self) -> None:
        """A request waited for this endpoint and its fellow replicas, all of them down."""
        if self._current is not None:
            self._current = replace(self._current, held=self._current.held + 1)

    def ensure_probing(self) -> None:
        """Make sure a down endpoint is being probed (the router's waiters do not call :meth:`admit`)."""
        if self._current is not None:
            self._ensure_watch()

    def hold(self, cause: str) -> None:
        """Take the endpoint down from outside (its process died); :meth:`release` brings it back."""
        self._held = True
        if self._current is None:
            self._tripped_by = "held"
            self._trip(cause)
        else:
            # A request saw the process go first; the supervisor knows why.
            self._current = replace(self._current, cause=cause)

    def release(self) -> None:
        self._held = False
        self._failures = 0
        self._probation = None
        if self._current is not None:
            self._recover()
            self._probation = None

    def fail(self, message: str) -> None:
        """End the outage in failure now: held and new requests raise :class:`EndpointDown`."""
        if self._current is None:
            self._trip(message)
        self._fail_outage(message)

    async def aclose(self) -> None:
        """Stop probing; the gate keeps its state, and probing starts again if it is used while down."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        if task.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # Internals.

    def _event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._opened is None or self._loop is not loop:
            self._opened = asyncio.Event()
            self._loop = loop
            if self._current is None or self._failed:
                self._opened.set()
        return self._opened

    def _ensure_watch(self) -> None:
        task = self._task
        loop = asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            self._task = loop.create_task(self._watch(), name=f"benchmax-gate-{self.shown}")

    async def _probe_once(self) -> bool:
        assert self._probe is not None
        checking = self._checking
        if checking is None or checking.done() or checking.get_loop() is not asyncio.get_running_loop():
            checking = self._checking = asyncio.ensure_future(self._probe())
        try:
            # A probe that hangs must not hold the request past the outage budget.
            return await asyncio.wait_for(asyncio.shield(checking), self.max_outage)
        except Exception:
            return False

    def _on_probation(self) -> bool:
        return self._probation is not None and time.monotonic() < self._probation_until

    def _trip(self, cause: str, *, since: float | None = None) -> None:
        reopened = self._probation if self._on_probation() else None
        self._probation = None
        if reopened is not None and self.outages and self.outages[-1] is reopened:
            # Failing again before answering a single request: the same outage goes on,
            # with its clock and its probe backoff, so a half-alive endpoint cannot hold
            # requests forever nor be probed at full rate.
            self.outages.pop()
            self._current = replace(reopened, ended_at=None, failed=False, error=None)
            self._delay = min(self.probe_max, self._delay * 2)
            logger.warning("model endpoint %s failed again right after coming back (%s)", self.shown, cause)
        else:
            now = time.monotonic()
            self._down_clock = now if since is None else min(since, now)
            self._current = Outage(self.endpoint, started_at=time.time() - (now - self._down_clock), cause=cause)
            self._delay = self.probe_initial
            then = "its requests go to the other replicas" if self.routed else "holding its requests"
            logger.warning("model endpoint %s is down (%s); %s", self.shown, cause, then)
        self._failed = False
        self._event().clear()
        self._emit("down", self._current)
        self._ensure_watch()

    async def _watch(self) -> None:
        """Probe the endpoint (one probe at a time, capped backoff) and enforce the outage budget."""
        while self._current is not None:
            left = self.max_outage - (time.monotonic() - self._down_clock)
            if left <= 0 and not self._failed:
                self._fail_outage(
                    f"endpoint {self.shown} down for {time.monotonic() - self._down_clock:.0f} s "
                    f"({self._current.cause}); past the outage budget of {self.max_outage:g} s (--max-outage)"
                )
            await asyncio.sleep(min(self._delay, left) if left > 0 else self._delay)
            if self._current is None:
                return
            if self._probe is not None and not self._held:
                left = self.max_outage - (time.monotonic() - self._down_clock)
                try:
                    # Within the budget a probe gets what is left of it, so the budget is a ceiling.
                    back = await asyncio.wait_for(self._probe(), None if self._failed else max(left, 0.0))
                except Exception:
                    back = False
                if back and self._current is not None and not self._held:
                    self._recover()
                    return
            self._delay = min(self.probe_max, self._delay * 2)

    def _fail_outage(self, message: str) -> None:
        if self._current is None or self._failed:
            return
        self._failed = True
        self._message = message
        self._current = replace(self._current, failed=True, error=message)
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
        self._failing.clear()
        self._probation = ended
        self._probation_until = time.monotonic() + self.probation
        then = "requests go to it again" if self.routed else f"{ended.held} held requests resume"
        logger.warning("model endpoint %s is back after %.1f s; %s", self.shown, ended.seconds, then)
        self._emit("up", ended)
        self._event().set()

    def _down_error(self) -> EndpointDown:
        return EndpointDown(self._message or f"endpoint {self.shown} is down")

    def _emit(self, event: GateEvent, outage: Outage) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, outage)
            except Exception:
                logger.exception("a listener of %s's gate failed", self.shown)
