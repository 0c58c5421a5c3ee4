"""The model endpoint of a run: checked before any rollout is spent, watched while the run goes.

A ``--base-url`` endpoint gets one preflight request, so an unreachable server
or a URL missing its ``/v1`` stops the run at once with what to do. With
several replicas each gets one: a run none of them can serve is refused, and
a replica that cannot be reached yet is said, marked down and routed around
until it answers. The embedded model is started here (its server must pass a
self-test first), served one request at a time with each rollout's turns back
to back (so its KV cache carries over from turn to turn), and supervised: when its process dies mid-run, that is said at
once (how it died, the end of its log), the endpoint's gate holds the rollouts
that were waiting, and the server is restarted on the same port, a bounded
number of times.

While the run goes, :class:`EndpointWatch` keeps the run store and the live
progress told of every outage, and stops the run when its endpoint is down
past the outage budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmax.auth import ModelAuth, redact_url
from benchmax.client import (
    ClientPool,
    EndpointGate,
    GateEvent,
    HttpModelClient,
    ModelError,
    Outage,
    PoolStats,
    ReplicaRouter,
    choose_model,
)

logger = logging.getLogger("benchmax.runner")

MAX_RESTARTS = 3
"""Times the embedded model's server is restarted after dying mid-run, before the run stops."""
EMBEDDED_TURN_HOLD = 1.0
"""Seconds the embedded model waits for a rollout's next turn (its tools running) before serving another.

The embedded server evaluates one prompt at a time and reuses its KV cache for
a prompt that extends the last one, so a rollout's turns are served back to
back: each turn then evaluates only the tool result and the new question, not
the whole conversation (``HttpModelClient.keep_turns_together``)."""
_WATCH_INTERVAL = 0.2


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    """What rollouts are sent to: the server, or the key of its replicas' router (the first replica)."""
    model: str
    embedded: bool = False
    replicas: tuple[str, ...] = ()
    """The servers behind ``base_url`` (itself alone when there is one)."""


class EndpointError(ModelError):
    """The run's model endpoint cannot serve it (unreachable, wrong URL, a server that crashes)."""

    def __init__(self, message: str) -> None:
        super().__init__("model_error", message)


@contextlib.asynccontextmanager
async def model_endpoint(
    base_url: str | Sequence[str] | None,
    model: str | None,
    clients: ClientPool,
    *,
    log_dir: Path,
    auth: ModelAuth | None = None,
    embedded_options: dict[str, Any] | None = None,
    check_model: bool = True,
) -> AsyncIterator[Endpoint]:
    """The endpoint to send rollouts to; ``base_url=None`` starts the embedded model.

    ``base_url`` may list several replicas of one model. The model name is
    chosen by ``benchmax.client.choose_model`` from what the servers list at
    ``/models``: a name they do not serve raises ``ModelNotServed`` before
    anything is stored (``check_model=False`` sends it anyway). A base URL the pool
    routes to a client of its own (a trainer's in-process policy, registered
    with ``ClientPool.register``) needs no preflight.
    """
    if base_url is not None:
        urls = tuple(url.rstrip("/") for url in ([base_url] if isinstance(base_url, str) else base_url))
        if len(urls) == 1 and not isinstance(clients.get(urls[0]), HttpModelClient | ReplicaRouter):
            yield Endpoint(urls[0], model or "policy", replicas=urls)
            return
        key = clients.route(urls)
        served = await _preflight(urls, model, clients, auth)
        yield Endpoint(key, choose_model(model, served, check=check_model), replicas=urls)
        return
    from benchmax.local import EmbeddedModel, EmbeddedModelError

    server = EmbeddedModel(log_dir=log_dir, **(embedded_options or {}))
    try:
        await server.astart()
    except EmbeddedModelError as exc:
        raise EndpointError(str(exc)) from None
    clients.http(server.base_url).keep_turns_together(hold=EMBEDDED_TURN_HOLD)
    supervisor = asyncio.create_task(_supervise(server, clients.gate(server.base_url)), name="benchmax-embedded")
    try:
        yield Endpoint(server.base_url, server.model, embedded=True, replicas=(server.base_url,))
    finally:
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervisor
        await server.astop()


async def _preflight(
    urls: tuple[str, ...], model: str | None, clients: ClientPool, auth: ModelAuth | None
) -> dict[str, list[str]]:
    """Check every replica at once; returns the models each reachable one lists.

    One that cannot be reached (or answers 5xx, still starting) is marked down
    and probed until it answers, while the others serve; any other refusal (a
    key refused, a URL without ``/v1``) is a mistake to fix, and stops the run.
    """
    answers = await asyncio.gather(
        *(clients.http(url).preflight(model, auth=auth) for url in urls), return_exceptions=True
    )
    served: dict[str, list[str]] = {}
    unreachable: dict[str, str] = {}
    for url, answer in zip(urls, answers, strict=True):
        if isinstance(answer, ModelError):
            if len(urls) == 1 or (answer.status is not None and answer.status < 500):
                raise EndpointError(str(answer))
            unreachable[url] = str(answer)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            served[url] = answer
    if not served:
        raise EndpointError(
            f"none of the {len(urls)} replicas can be reached: " + "; ".join(unreachable.values())
        )
    for url, why in unreachable.items():
        logger.warning(
            "replica %s cannot serve yet (%s); the run goes on with the other %d and sends to it once it answers",
            url,
            why,
            len(served),
        )
        await clients.gate(url).failure(why, "refused")
    return served


async def _supervise(server: Any, gate: EndpointGate) -> None:
    """Watch the embedded server; after a death hold its requests, restart it, let them go again."""
    from benchmax.local import EmbeddedModelError, describe_exit

    restarts = 0
    while True:
        ended = await server.wait_exit(_WATCH_INTERVAL)
        if ended is None:
            return
        pid, returncode = ended
        how = describe_exit(returncode)
        gate.hold(f"the embedded model server {how}")
        logger.error(
            "the embedded model server (pid %d) %s; last lines of %s:\n%s",
            pid,
            how,
            server.log_path,
            server.log_tail(),
        )
        if restarts >= MAX_RESTARTS:
            gate.fail(
                f"the embedded model server {how} again after {MAX_RESTARTS} restarts; its log is {server.log_path}"
            )
            return
        restarts += 1
        logger.warning("restarting the embedded model server (%d/%d)", restarts, MAX_RESTARTS)
        try:
            await server.arestart()
        except EmbeddedModelError as exc:
            gate.fail(f"the embedded model server could not be restarted: {exc}")
            return
        gate.release()


class OutageSource(Protocol):
    """Where a run hears of its endpoint's outages: the client pool, or the Ray executor's merged view."""

    def subscribe(self, listener: Callable[[GateEvent, Outage], None]) -> None: ...

    def outages(self) -> list[Outage]: ...

    def waiting(self, base_url: str) -> int: ...

    def failed(self, base_url: str) -> bool: ...


class Recorder(Protocol):
    def record_outage(self, outage: Outage) -> None: ...


class OutageObserver(Protocol):
    def on_outage(self, event: GateEvent, outage: Outage, waiting: int) -> None: ...


Stats = Callable[[], PoolStats]


class EndpointWatch:
    """Tells the run store and the observer of every outage of the run's endpoint, and stops the run past its budget.

    ``stop`` is called once, with the reason, when requests for the endpoint
    fail for being down too long (every replica, with several): nothing those
    requests held may be stored, so the run stops and ``--resume`` reruns them.
    While a server is down the observer hears again every second, so the number
    of rollouts waiting stays current; with several replicas, an observer with an
    ``on_endpoints`` method hears each second how many requests each served
    (from ``stats``, the executor's). An observer with an ``on_load`` method hears
    each second how many rollouts are in flight (``in_flight``) and how many of
    them wait for the model (requests queued in the clients).
    """

    REFRESH = 1.0

    def __init__(
        self,
        source: OutageSource,
        endpoint: Endpoint,
        session: Recorder,
        observer: OutageObserver | None,
        stop: Callable[[str], None],
        *,
        stats: Stats | None = None,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        self.source = source
        self.stats = stats
        self.in_flight = in_flight
        self.endpoint = endpoint
        self.session = session
        self.observer = observer
        self._stop = stop
        self._stopped = False
        self._refresh: asyncio.Task[None] | None = None

    def __enter__(self) -> EndpointWatch:
        self.source.subscribe(self._on_outage)
        for outage in self.source.outages():  # found before the run began (a replica down at preflight)
            self._on_outage("down" if outage.ended_at is None else "up", outage)
        if self.observer is not None:
            self._refresh = asyncio.get_running_loop().create_task(self._keep_observer_current())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        on_endpoints = getattr(self.observer, "on_endpoints", None)
        if on_endpoints is not None and self.stats is not None and len(self.endpoint.replicas) > 1:
            on_endpoints(_per_server(self.stats()))

    def stop(self, reason: str) -> None:
        if not self._stopped:
            self._stopped = True
            self._stop(reason)

    def _on_outage(self, event: GateEvent, outage: Outage) -> None:
        if outage.endpoint not in self.endpoint.replicas:
            return
        self.session.record_outage(outage)
        if self.observer is not None:
            self.observer.on_outage(event, outage, self.source.waiting(self.endpoint.base_url))
        if event == "failed" and self.source.failed(self.endpoint.base_url):
            reason = outage.error or outage.cause
            self.stop(reason if len(self.endpoint.replicas) == 1 else _all_down(self.endpoint, reason))

    async def _keep_observer_current(self) -> None:
        assert self.observer is not None
        on_endpoints = getattr(self.observer, "on_endpoints", None)
        if len(self.endpoint.replicas) < 2 or self.stats is None:
            on_endpoints = None
        on_load = getattr(self.observer, "on_load", None) if self.in_flight is not None else None
        while True:
            stats = self.stats() if self.stats is not None else PoolStats()
            if on_endpoints is not None:
                on_endpoints(_per_server(stats))
            if on_load is not None and self.in_flight is not None:
                on_load(in_flight=self.in_flight(), waiting=stats.queued)
            await asyncio.sleep(self.REFRESH)
            for outage in self.source.outages():
                if outage.ended_at is None and outage.endpoint in self.endpoint.replicas:
                    self.observer.on_outage(
                        "failed" if outage.failed else "down", outage, self.source.waiting(self.endpoint.base_url)
                    )


def _all_down(endpoint: Endpoint, reason: str) -> str:
    return f"all {len(endpoint.replicas)} replicas of {redact_url(endpoint.base_url)} are down; the last: {reason}"


def _per_server(stats: PoolStats) -> dict[str, dict[str, Any]]:
    """Each server's counters, as the observer shows them."""
    return {url: figures.to_json() for url, figures in stats.endpoints.items()}
