"""How many model requests one endpoint may have in flight: a ceiling, and fewer while this loop is saturated.

The ceiling (``EngineConfig.max_requests``) protects the server. A
second bound protects the driver: once the event loop that sends and reads the
requests never idles, another request in flight adds no throughput. Its reply
only waits in a socket buffer for the loop to get to it, every loop iteration
grows by one more ready callback, and timers (request timeouts, the health gate,
progress) fire late: at 0 ms of model latency and 1,024 rollouts in flight, 256
requests made about 90 ms of loop lag (p99) where 16-48 made under 20, at the
same rate or a higher one (``bench/README.md``).

So while requests queue for a slot, a timer probes the loop every 10 ms. A loop
that idles runs it on time; a saturated one runs it late, nearly every time. A
single slow callback (a reward computed on the loop) makes one late probe among
many on time, and CPU taken by other processes delays a probe by a scheduler
slice at most: neither reads as saturation. While nearly every probe is late the
limit shrinks, and while most are on time it grows back.

A busy loop is not proof that fewer requests would do: at 50 ms of model latency
a loop can be nearly saturated and still need every request it has in flight.
By Little's law a rate of R requests per second at S seconds each needs R x S in
flight. R is the best rate of the last few windows; S is the window's fastest
request less the least delay any probe saw (the loop's share of that request's
time). The limit never sheds below twice R x S, and at most halves per window.
At 0 ms of latency S is about a millisecond and the limit settles near 16-48; at
50 ms it stays at 256. Against a real model server the loop idles and the limit
stays at the ceiling; the probe runs only while requests wait.

asyncio's ``Semaphore`` cannot change its size, hence this small FIFO one.

Keyed requests (a rollout's turns, keyed by its rollout id) can keep their turns
together, for a server that evaluates one prompt at a time and reuses its KV
cache only for a prompt that extends the one before (the embedded llama.cpp
model): with ``hold`` > 0 a key that releases its slot keeps it reserved for up
to ``hold`` seconds, until its next turn asks (and gets it at once) or
:meth:`RequestLimit.forget` says the key is done; and a waiting key that was
served before goes ahead of keys that were not, oldest first. Eight rollouts on
one slot then run turn after turn each, rather than taking turns and evicting
each other's cache.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections import deque

logger = logging.getLogger("benchmax.client")

PERIOD = 0.01
"""Seconds between probes."""
LATE = 0.002
"""A probe this many seconds past its time found the loop busy."""
PROBES = 16
"""Probes per decision: a fraction of them late says how saturated the loop is."""
WINDOW = 0.2
"""Seconds per decision at most (a saturated loop runs its probes far apart)."""
SATURATED = 0.9
"""Share of late probes at or above which the limit shrinks (to what the rate needs, at most by half)."""
SPARE = 0.5
"""Share below which it grows back (by a quarter); between the two it holds."""
GAIN = 2.0
"""Requests kept in flight per request the rate needs (see ``resize``): headroom for bursts."""
RECENT = 8
"""Windows whose best rate a decision goes by (one slow window is no sign of fewer requests needed)."""
FLOOR = 16
"""Never fewer requests than this (or the ceiling, when that is lower)."""


class RequestLimit:
    """A FIFO limit on requests in flight, resized while requests queue for it (see the module).

    ``granted = await limit.acquire()`` before a request, ``limit.release(granted)`` after it.
    ``adaptive=False`` keeps it at ``ceiling``, as a plain semaphore. ``hold`` > 0 keeps a key's
    turns together (see the module): ``acquire(key)``, ``release(granted, key=key)``, ``forget(key)``.
    """

    __slots__ = (
        "_arrivals",
        "_calmest",
        "_due",
        "_fastest",
        "_held",
        "_lapse",
        "_late",
        "_loop",
        "_probes",
        "_rates",
        "_released",
        "_served",
        "_start",
        "_told",
        "_waited",
        "_waiters",
        "adaptive",
        "ceiling",
        "floor",
        "hold",
        "in_use",
        "limit",
        "name",
    )

    def __init__(
        self, ceiling: int, *, adaptive: bool = True, floor: int = FLOOR, name: str = "", hold: float = 0.0
    ) -> None:
        if ceiling < 1:
            raise ValueError(f"a request limit needs a ceiling >= 1, got {ceiling}")
        self.ceiling = ceiling
        self.floor = max(1, min(floor, ceiling))
        self.limit = ceiling
        self.in_use = 0
        self.adaptive = adaptive
        self.name = name
        """Whose requests these are (the endpoint), for the log."""
        self.hold = hold
        """Seconds a key's slot stays reserved for its next turn (0: no reservations, plain FIFO)."""
        self._told = False
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        """A heap: keys served before first (by when first served), then the rest in arrival order."""
        self._arrivals = itertools.count()
        self._served: dict[str, int] = {}
        """Keys served and not yet forgotten, with when each was first served (``hold`` > 0 only)."""
        self._held: str | None = None
        """The key the one reserved slot waits for."""
        self._lapse: asyncio.TimerHandle | None = None
        self._waited = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop being probed; ``None`` while no probe is scheduled."""
        self._due = 0.0
        self._start = 0.0
        self._probes = 0
        self._late = 0
        self._released = 0
        self._fastest = math.inf
        """The window's fastest request (seconds, from its slot to its release)."""
        self._calmest = math.inf
        """The window's least late probe (seconds): the loop's delay no request escaped."""
        self._rates: deque[float] = deque(maxlen=RECENT)
        """Requests per second completed in each recent window."""

    def __repr__(self) -> str:
        return f"RequestLimit(limit={self.limit}, ceiling={self.ceiling}, in_use={self.in_use})"

    @property
    def waiting(self) -> int:
        """Requests queued for a slot now."""
        return sum(1 for *_, slot in self._waiters if not slot.done())

    async def acquire(self, key: str | None = None) -> float:
        """Wait for a slot; returns when it was granted (the loop's clock), for :meth:`release`.

        ``key`` (a rollout id) names whose turn this is, for reservations (``hold``).
        """
        loop = asyncio.get_running_loop()
        if key is not None and key == self._held:  # its reserved slot: still counted in use
            self._unhold()
            return loop.time()
        if self.in_use < self.limit:  # then no live waiter is queued: every release wakes them first
            self.in_use += 1
            self._note(key)
            return loop.time()
        self._waited = True
        if self.adaptive and self._loop is None:
            self._loop = loop
            self._probes = 0
            self._probe()
        slot = loop.create_future()
        first = self._served.get(key) if key is not None else None
        arrival = next(self._arrivals)
        heapq.heappush(self._waiters, (0, first, arrival, slot) if first is not None else (1, arrival, arrival, slot))
        try:
            await slot
        except asyncio.CancelledError:
            if slot.done() and not slot.cancelled():
                self._release()  # handed a slot as the cancel came: hand it on
            raise  # a cancelled waiter stays in the queue; waking skips it
        self._note(key)
        return loop.time()

    def release(self, granted: float, *, served: bool = True, key: str | None = None) -> None:
        """Give the slot back; ``granted`` is what :meth:`acquire` returned. A request that failed
        (``served=False``) says nothing of how long the server takes: a refused one returns at once.
        With ``hold`` and a ``key`` the slot stays reserved for that key's next turn (see the module)."""
        if served and self._loop is not None:
            took = self._loop.time() - granted
            if took < self._fastest:
                self._fastest = took
            self._released += 1
        if key is not None and self.hold > 0 and key in self._served and self._held is None:
            self._held = key
            self._lapse = asyncio.get_running_loop().call_later(self.hold, self._unreserve)
            return
        self._release()

    def forget(self, key: str) -> None:
        """``key`` asks for no more turns (its rollout ended): its reserved slot goes to the next waiter."""
        self._served.pop(key, None)
        if key == self._held:
            self._unreserve()

    def _note(self, key: str | None) -> None:
        if key is not None and self.hold > 0 and key not in self._served:
            self._served[key] = next(self._arrivals)

    def _unhold(self) -> None:
        self._held = None
        if self._lapse is not None:
            self._lapse.cancel()
            self._lapse = None

    def _unreserve(self) -> None:
        """The reserved slot's key did not come back in time (or is done): free the slot."""
        if self._held is not None:
            self._unhold()
            self._release()

    def _release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters and self.in_use < self.limit:
            *_, slot = heapq.heappop(waiters)
            if not slot.done():
                self.in_use += 1
                slot.set_result(None)

    def _probe(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + PERIOD
        self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        lateness = now - self._due
        if not self._probes:  # a window starts
            self._start, self._late, self._released = self._due - PERIOD, 0, 0
            self._fastest = self._calmest = math.inf
        self._probes += 1
        self._calmest = min(self._calmest, lateness)
        if lateness > LATE:
            self._late += 1
        if self._probes < PROBES and (self._probes < 2 or now - self._start < WINDOW):
            self._probe()
            return
        probes, self._probes = self._probes, 0
        self._rates.append(self._released / (now - self._start))
        if not self._waited:
            self._loop = None  # nobody queued since the last decision: the limit does not bind
            return
        self._waited = False
        self.resize(self._late / probes, max(self._rates), max(0.0, self._fastest - self._calmest))
        self._probe()

    def resize(self, late: float, rate: float = math.inf, service: float = math.inf) -> None:
        """One decision: ``late`` is the share (0..1) of a window's probes that found the loop busy,
        ``rate`` the best requests per second of recent windows, ``service`` the window's fastest
        request less the loop's least delay (seconds): about the server's own time. ``rate x service``
        requests would keep that rate with nothing waiting here."""
        if late >= SATURATED:
            needed = rate * service * GAIN
            lower = max(self.floor, self.limit // 2, math.ceil(needed) if needed < self.ceiling else self.ceiling)
            if lower < self.limit:
                self.limit = lower
                self._tell()
        elif late < SPARE:
            self.limit = min(self.ceiling, self.limit + max(1, self.limit // 4))
            self._wake()

    def _tell(self) -> None:
        if self._told:
            return
        self._told = True  # once: the limit moves every fraction of a second
        logger.info(
            "requests to %s: fewer than %d in flight while this process's event loop is saturated "
            "(more would only wait here for the loop); EngineConfig(adapt_requests=False) holds the limit",
            self.name or "the endpoint",
            self.ceiling,
        )
