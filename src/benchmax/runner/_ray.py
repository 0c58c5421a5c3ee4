"""Groups on a pool of Ray actors, for runs that outgrow one process or one machine.

Each actor is a Ray worker process holding its own env instance (built from the
run's env spec and kwargs) and its own engine; the driver keeps the store,
progress, zero-fill and summary, so a run's records do not depend on where its
groups ran. Each group is one actor call awaited on its own, so results stream
back as groups settle and a slow actor delays only its own groups. A group whose
actor dies is run again on another actor: the store only ever sees the result
that came back, so nothing is lost or written twice.

Each actor keeps its own client pool, so its own view of which servers (or
replicas) are down: a failed connection tells each actor within one request,
and sharing the view would put a cross-process call on every request's path.
The driver follows every actor's outage events (one long-poll call per actor)
and merges them into one view for the run store and the live progress. A
group whose requests an outage failed (past ``--max-outage``) does not come
back as a result: the driver raises :class:`EndpointDown` and the run stops,
resumable, with nothing of that group stored.

This module is imported only for ``executor="ray"``; local runs never load Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import math
import os
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

try:
    import ray
    from ray.exceptions import ObjectLostError, RayActorError, RayTaskError
except ImportError as exc:  # pragma: no cover - exercised only where Ray is absent
    raise ImportError("executor='ray' needs Ray installed: pip install 'benchmax[ray]'") from exc

from benchmax.auth import ModelAuth, bind_model_auth, portable_model_auth
from benchmax.client import (
    CacheSettings,
    EndpointDown,
    GateEvent,
    Outage,
    PoolStats,
    PriceTable,
)
from benchmax.engine import EngineConfig, GroupResult, StoredRollout
from benchmax.envs import Environment, RolloutRequest, TerminationReason
from benchmax.loading import EnvSpec
from benchmax.mix import EnvMix, MixSpec
from benchmax.runner._config import RunConfig
from benchmax.runner._executor import LocalExecutor, RolloutSlots, failed_group
from benchmax.runner._outages import _MergedOutages
from benchmax.telemetry import TelemetrySession, start_telemetry, stop_telemetry

logger = logging.getLogger("benchmax.runner")

WORKER_LOST = TerminationReason.HARNESS_ERROR
"""Termination reason of a group whose actors kept dying (``MAX_GROUP_ATTEMPTS`` times): the
group could not be run, the one reason every executor gives that event."""

MAX_GROUP_ATTEMPTS = 3
"""Tries per group when actors die under it. The last try runs alone on an actor, so a group that
crashes its actor is told apart from the groups that only shared one with it; it is failed, not
retried forever."""

START_TIMEOUT = 300.0
"""Seconds for an actor to be placed and build its env; a cluster short of CPUs fails here, clearly."""

CLOSE_TIMEOUT = 60.0
"""Seconds each actor gets for its env's ``aclose`` at the end of a run."""

_LOST = (RayActorError, ObjectLostError)
_FOLLOW_INTERVAL = 2.0
"""Seconds an actor holds the driver's call for its outage events when it has none to tell."""


class _Worker:
    """The actor body: one env, one executor, in one Ray worker process."""

    def __init__(
        self,
        spec: str,
        kwargs: dict[str, Any],
        engine: EngineConfig,
        replicas: tuple[str, ...] = (),
        prices: PriceTable | None = None,
        cache: CacheSettings | None = None,
        auth: dict[str, ModelAuth] | None = None,
        mix: MixSpec | None = None,
    ) -> None:
        self._spec = EnvSpec(spec, kwargs)
        self._mix = mix
        self._auth = auth or {}
        self._engine_config = engine
        self._replicas = replicas
        self._prices = prices
        self._cache = cache
        self._env: Environment | None = None
        self._executor: LocalExecutor | None = None
        self._events: list[tuple[GateEvent, Outage]] = []
        self._changed: asyncio.Event | None = None
        self._endpoints: set[str] = set()
        self._last_failure = ""
        self._telemetry: TelemetrySession | None = None

    async def start(self) -> dict[str, Any]:
        """Build the env here, not in ``__init__``, so its errors come back as ordinary exceptions.

        Traces go out through this actor's own exporter, started from the run's typed settings;
        the exporter reads any ``OTEL_EXPORTER_OTLP_HEADERS`` (keys) from this process's
        environment, so no key travels with the actor's arguments."""
        self._telemetry = start_telemetry(self._engine_config.telemetry)
        self._env = self._spec.load() if self._mix is None else await EnvMix.load(self._mix)
        self._executor = LocalExecutor(self._env, self._engine_config, prices=self._prices, cache=self._cache)
        clients = self._executor.clients
        if len(self._replicas) > 1:
            clients.route(self._replicas)
        self._changed = asyncio.Event()
        clients.subscribe(self._on_outage)
        await self._executor.start()
        return {"node": ray.util.get_node_ip_address(), "pid": os.getpid()}

    async def run_group(self, requests: list[RolloutRequest]) -> tuple[GroupResult | None, PoolStats, str]:
        """The group's result and this actor's client counters; no result, and why, when an outage
        failed requests while the group ran (what it holds is not a result to store)."""
        assert self._executor is not None, "start() must run before run_group()"
        return await self._watched(requests, self._executor.run_group(requests))

    async def rescore_group(
        self, requests: list[RolloutRequest], stored: list[StoredRollout]
    ) -> tuple[GroupResult | None, PoolStats, str]:
        """``run_group`` for stored transcripts scored again (a judge's calls can meet an outage too)."""
        assert self._executor is not None, "start() must run before rescore_group()"
        return await self._watched(requests, self._executor.rescore_group(requests, stored))

    async def _watched(
        self, requests: list[RolloutRequest], work: Awaitable[GroupResult]
    ) -> tuple[GroupResult | None, PoolStats, str]:
        assert self._executor is not None
        self._endpoints.update(request.base_url for request in requests)
        before = self._endpoint_down()
        with bind_model_auth(self._auth):  # the driver's bindings, which this process has no other way to see
            result = await work
        stats = self._executor.totals()
        if self._endpoint_down() > before:
            return None, stats, self._last_failure or "the model endpoint is down past the outage budget"
        return result, stats, ""

    async def outage_events(self, after: int, timeout: float) -> tuple[list[tuple[GateEvent, Outage]], dict[str, int]]:
        """The outage events past the first ``after`` (waiting up to ``timeout`` s for one), and the
        requests waiting per endpoint."""
        assert self._changed is not None and self._executor is not None
        if len(self._events) <= after:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
        clients = self._executor.clients
        return self._events[after:], {url: clients.waiting(url) for url in self._endpoints}

    def _on_outage(self, event: GateEvent, outage: Outage) -> None:
        self._events.append((event, outage))
        if event == "failed" and outage.error:
            self._last_failure = outage.error
            if len(self._replicas) > 1:
                self._last_failure = (
                    f"all {len(self._replicas)} replicas of {self._replicas[0]} are down; the last: {outage.error}"
                )
        if self._changed is not None:
            self._changed.set()

    def _endpoint_down(self) -> int:
        assert self._executor is not None
        return int(self._executor.totals().failures.get("endpoint_down", 0))

    async def aclose(self) -> None:
        try:
            if self._executor is not None:
                await self._executor.aclose()
            if self._env is not None:
                try:
                    await self._env.aclose()
                except Exception:
                    logger.exception("%s.aclose() failed", type(self._env).__name__)
        finally:
            telemetry, self._telemetry = self._telemetry, None
            await asyncio.to_thread(stop_telemetry, telemetry)  # this actor's spans go out before it ends


_RemoteWorker = ray.remote(_Worker)


@dataclass(eq=False, slots=True)
class _Handle:
    actor: Any
    name: str = "worker"
    in_flight: int = 0
    reserved: bool = False
    """Held for a group's last try: no new groups, and that group starts once the others drain."""
    client_stats: PoolStats = field(default_factory=PoolStats)


class RayExecutor:
    """A pool of Ray actors behind the runner's ``GroupExecutor`` interface.

    ``config.ray_address`` joins an existing cluster (``auto``, ``ray://host:port``);
    without it a local cluster is started with ``config.workers`` CPUs. Ray that
    the caller initialised already is used as it is, and only a cluster this
    executor started is shut down by it. Each actor reserves one CPU; the pool
    has ``config.workers`` actors, or one per CPU of the cluster.

    ``auth`` (the run's ``--auth`` bindings) goes to every actor, which binds it
    around each group as the driver binds it around a local run. Only providers
    that hold no key may go (:func:`benchmax.auth.portable_model_auth`): an
    :class:`~benchmax.auth.EnvironmentKeyAuth` reads its variable in the actor's
    own process. A local cluster started here inherits this process's
    environment; on a remote cluster the variable must be set on every node.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        prices: PriceTable | None = None,
        auth: Mapping[str, ModelAuth] | None = None,
    ) -> None:
        if config.workers is not None and config.workers < 1:
            raise ValueError(f"workers must be >= 1, got {config.workers}")
        self.config = config
        self._prices = prices
        self._auth = portable_model_auth(auth or {}, where="Ray actors")
        self._spec = _portable_spec(config.env)
        self._mix = (
            None
            if config.mix is None
            else replace(
                config.mix,
                members=tuple(
                    replace(
                        member,
                        spec=_portable_spec(member.spec),
                        data_dir=member.data_dir.resolve() if member.data_dir is not None else None,
                    )
                    for member in config.mix.members
                ),
            )
        )
        """A mixture's members as every actor loads them (each actor holds the whole mixture)."""
        self._owns_ray = False
        self._workers: list[_Handle] = []
        self._retired: list[_Handle] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._pool = asyncio.Condition()
        self.slots = RolloutSlots(config.concurrency)
        self._engine_config = config.engine
        self._spawned = 0
        self._deaths = 0
        self._reruns = 0
        self._groups = 0
        self._endpoint_checked = False
        self.outage_source = _MergedOutages()
        self._followers: set[asyncio.Task[None]] = set()

    def actors(self) -> list[tuple[Any, int]]:
        """The live actors and the rollouts each has in flight, for operators and fault drills."""
        return [(handle.actor, handle.in_flight) for handle in self._workers]

    async def start(self) -> None:
        await asyncio.to_thread(self._connect)
        cpus = ray.cluster_resources().get("CPU", 0)
        size = self.config.workers or max(1, int(cpus))
        if size > cpus:
            logger.warning(
                "%d Ray workers need %d CPUs but the cluster has %g; waiting up to %gs for nodes to join",
                size,
                size,
                cpus,
                START_TIMEOUT,
            )
        # The per-endpoint request limit is for the whole run, so each actor gets its share.
        share = math.ceil(self.config.engine.max_requests / size)
        self._engine_config = replace(self.config.engine, max_requests=share)
        handles = [self._spawn() for _ in range(size)]
        try:
            await asyncio.gather(*(self._start_worker(handle) for handle in handles))
        except BaseException:
            for handle in handles:
                _kill(handle)
            raise
        self._workers = handles
        for handle in handles:
            self._follow(handle)
        logger.info("ray executor: %d workers for %s", size, self.config.env)

    async def run_group(self, requests: Sequence[RolloutRequest]) -> GroupResult:
        return await self._dispatch(list(requests), "run_group")

    async def rescore_group(self, requests: Sequence[RolloutRequest], stored: Sequence[StoredRollout]) -> GroupResult:
        return await self._dispatch(list(requests), "rescore_group", list(stored))

    async def _dispatch(self, batch: list[RolloutRequest], method: str, *extra: Any) -> GroupResult:
        """One group on the least busy actor, run again elsewhere when its actor dies."""
        if batch and not self._endpoint_checked:
            self._endpoint_checked = True
            replicas = self.config.base_urls if len(self.config.base_urls) > 1 else (batch[0].base_url,)
            for url in replicas:
                _warn_if_loopback(url)
        lost: list[str] = []
        async with self.slots.hold(len(batch)):
            while len(lost) < MAX_GROUP_ATTEMPTS:
                alone = len(lost) == MAX_GROUP_ATTEMPTS - 1
                handle = await self._pick(alone=alone)
                handle.in_flight += len(batch)
                ref = getattr(handle.actor, method).remote(batch, *extra)
                try:
                    result, stats, down = await ref
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref)
                    raise
                except _LOST as exc:
                    lost.append(f"{handle.name}: {_first_line(exc)}")
                    self._lose(handle, exc)
                    continue
                except RayTaskError as exc:
                    raise exc.as_instanceof_cause() from None
                finally:
                    handle.in_flight -= len(batch)
                    if alone:
                        handle.reserved = False
                    await self._pool_changed()
                handle.client_stats = stats
                if result is None:
                    raise EndpointDown(down)
                self._groups += 1
                if lost:
                    self._reruns += 1
                return result
        return _lost_group(batch, lost)

    def totals(self) -> PoolStats:
        """Model-client counters summed over every actor, live and retired."""
        handles = [*self._workers, *self._retired]
        return PoolStats.merge([PoolStats(calls=()), *(handle.client_stats for handle in handles)])

    def stats(self) -> dict[str, Any]:
        """Model-client counters summed over every actor, plus the pool's own."""
        merged = self.totals().to_json()
        merged["ray"] = {
            "workers": len(self._workers),
            "workers_started": self._spawned,
            "worker_deaths": self._deaths,
            "groups": self._groups,
            "groups_rerun": self._reruns,
        }
        return merged

    async def aclose(self) -> None:
        for task in [*self._starting, *self._followers]:
            task.cancel()
        await asyncio.gather(*self._starting, *self._followers, return_exceptions=True)
        workers, self._workers = self._workers, []
        closing = [handle.actor.aclose.remote() for handle in workers]
        for handle, ref in zip(workers, closing, strict=True):
            try:
                await asyncio.wait_for(asyncio.wrap_future(ref.future()), CLOSE_TIMEOUT)
            except Exception as exc:
                logger.warning("%s: closing its env failed: %s", handle.name, _first_line(exc))
            _kill(handle)
            self._retired.append(handle)
        if self._owns_ray:
            self._owns_ray = False
            await asyncio.to_thread(ray.shutdown)

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        if self.config.ray_address:
            ray.init(address=self.config.ray_address, logging_level=logging.WARNING)
        else:
            ray.init(num_cpus=self.config.workers, include_dashboard=False, logging_level=logging.WARNING)
        self._owns_ray = True

    def _spawn(self) -> _Handle:
        self._spawned += 1
        actor = _RemoteWorker.options(num_cpus=1, scheduling_strategy="SPREAD").remote(
            self._spec,
            dict(self.config.env_kwargs),
            self._engine_config,
            self.config.base_urls,
            self._prices,
            self.config.cache,
            self._auth,
            self._mix,
        )
        return _Handle(actor, name=f"ray worker {self._spawned}")

    def _follow(self, handle: _Handle) -> None:
        """Keep one call to the actor's ``outage_events`` going, for the merged view of outages."""

        async def follow() -> None:
            seen = 0
            try:
                while handle in self._workers:
                    ref = handle.actor.outage_events.remote(seen, _FOLLOW_INTERVAL)
                    try:
                        events, waiting = await ref
                    except asyncio.CancelledError:
                        with contextlib.suppress(Exception):
                            ray.cancel(ref)
                        raise
                    seen += len(events)
                    self.outage_source.actor_events(id(handle), events, waiting)
            except (RayTaskError, *_LOST):
                pass
            finally:
                self.outage_source.actor_lost(id(handle))

        task = asyncio.create_task(follow(), name=f"benchmax-follow-{handle.name}")
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    async def _start_worker(self, handle: _Handle) -> None:
        try:
            where = await asyncio.wait_for(asyncio.wrap_future(handle.actor.start.remote().future()), START_TIMEOUT)
        except TimeoutError:
            resources = ray.cluster_resources()
            raise RuntimeError(
                f"{handle.name} was not placed and started within {START_TIMEOUT:g}s; the cluster has "
                f"{resources.get('CPU', 0):g} CPUs and each worker takes one: lower --workers or add nodes"
            ) from None
        except (RayTaskError, *_LOST) as exc:
            cause = exc.cause if isinstance(exc, RayTaskError) and isinstance(exc.cause, BaseException) else exc
            raise RuntimeError(
                f"{handle.name} could not start env {self._spec!r}: {_first_line(cause)}. benchmax, the env "
                "code and its dependencies must be importable on every Ray node (see docs/scale.md)"
            ) from exc
        handle.name = f"ray worker {handle.name.rsplit(' ', 1)[-1]} (pid {where['pid']} on {where['node']})"

    async def _pick(self, *, alone: bool) -> _Handle:
        """The unreserved actor with the fewest rollouts in flight.

        ``alone`` reserves it and waits until it is idle. With no actor left this waits
        for a replacement, and fails the run only when none is starting.
        """
        async with self._pool:
            while True:
                if not self._workers and not self._starting:
                    raise RuntimeError(
                        f"every Ray worker died and no replacement could start ({self._deaths} deaths); "
                        "see the worker errors above"
                    )
                free = [handle for handle in self._workers if not handle.reserved]
                if not free:
                    await self._pool.wait()
                    continue
                handle = min(free, key=lambda candidate: candidate.in_flight)
                if not alone:
                    return handle
                handle.reserved = True
                try:
                    await self._pool.wait_for(functools.partial(self._idle_or_gone, handle))
                except BaseException:
                    handle.reserved = False
                    raise
                if handle in self._workers:
                    return handle

    def _idle_or_gone(self, handle: _Handle) -> bool:
        return handle.in_flight == 0 or handle not in self._workers

    async def _pool_changed(self) -> None:
        async with self._pool:
            self._pool.notify_all()

    def _lose(self, handle: _Handle, exc: BaseException) -> None:
        if handle not in self._workers:
            return
        self._workers.remove(handle)
        self._retired.append(handle)
        self._deaths += 1
        _kill(handle)
        logger.warning("%s died (%s); its groups run again on other workers", handle.name, _first_line(exc))
        task = asyncio.create_task(self._replace())
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _replace(self) -> None:
        handle = self._spawn()
        try:
            await self._start_worker(handle)
        except asyncio.CancelledError:
            _kill(handle)
            raise
        except Exception as exc:
            _kill(handle)
            logger.error("a replacement Ray worker did not start: %s", exc)
        else:
            self._workers.append(handle)
            self._follow(handle)
        finally:
            # Off the starting set before waking anyone, so a pool with no worker and no
            # replacement coming is seen as such.
            current = asyncio.current_task()
            if current is not None:
                self._starting.discard(current)
            await self._pool_changed()


def _warn_if_loopback(base_url: str) -> None:
    """A loopback model URL means a different machine on each node: say so before every rollout fails."""
    host = urlsplit(base_url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    nodes = sum(1 for node in ray.nodes() if node.get("Alive")) if loopback else 0
    if nodes > 1:
        logger.warning(
            "the model endpoint %s is a loopback address but the Ray cluster has %d nodes: workers on the "
            "other nodes cannot reach it; give a --base-url every node can reach (see docs/scale.md)",
            base_url,
            nodes,
        )


def _kill(handle: _Handle) -> None:
    with contextlib.suppress(Exception):
        ray.kill(handle.actor, no_restart=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _lost_group(requests: Sequence[RolloutRequest], lost: Sequence[str]) -> GroupResult:
    """A group no actor survived: settled as failed, like any operational failure, so the run goes on."""
    error = f"the Ray worker running this group died {len(lost)} times: " + "; ".join(lost)
    logger.error("group of %s: %s", requests[0].rollout_id if requests else "?", error)
    return failed_group(requests, WORKER_LOST, error, started_at=time.time())


def _portable_spec(spec: str) -> str:
    """A file or directory spec made absolute: Ray workers do not share the driver's working directory."""
    head, sep, tail = spec.rpartition(":")
    has_class = bool(sep) and tail.isidentifier() and not (len(head) == 1 and head.isalpha())
    path_part, suffix = (head, f":{tail}") if has_class else (spec, "")
    path = Path(path_part)
    if path.is_dir() or (path.suffix == ".py" and path.is_file()):
        return f"{path.resolve()}{suffix}"
    return spec
