"""One client per endpoint, shared by every rollout that targets it; a router per set of replicas."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from benchmax.client._gate import DEFAULT_MAX_OUTAGE, EndpointGate, GateEvent, Outage
from benchmax.client._http import ClientStats, HttpModelClient
from benchmax.client._retry import RetryPolicy
from benchmax.client._router import ReplicaRouter
from benchmax.client._stats import PoolStats
from benchmax.client._types import ModelClient


class ClientPool:
    """Model clients by base URL: one connection pool, concurrency limit and health gate each.

    Credentials are per request (a rollout's ``model_auth``), so one endpoint
    keeps one pool whatever keys its requests carry. :meth:`route` puts several
    replicas behind one logical endpoint; :meth:`get` then returns their router.

    The pool outlives :meth:`aclose`: it closes connections and stops probes,
    but keeps each endpoint's gate (its outages, and whether it is down), so a
    pool used again after closing carries on where it stopped.
    """

    def __init__(
        self,
        *,
        timeout: float = 600.0,
        max_requests: int = 256,
        adapt_requests: bool = True,
        retry: RetryPolicy | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
    ) -> None:
        self.timeout = timeout
        self.max_requests = max_requests
        self.adapt_requests = adapt_requests
        self.retry = retry
        self.max_outage = max_outage
        self._endpoints: dict[str, ModelClient] = {}
        """What ``get`` returns: an HTTP client, a router, or a registered client."""
        self._http: dict[str, HttpModelClient] = {}
        """Every HTTP client, by the base URL of its server (replicas included)."""
        self._routers: dict[str, ReplicaRouter] = {}
        self._listeners: list[Callable[[GateEvent, Outage], None]] = []

    def get(self, base_url: str) -> ModelClient:
        """The client rollouts aimed at ``base_url`` use (a router when it names a set of replicas)."""
        client = self._endpoints.get(base_url)
        if client is not None:
            return client
        key = base_url.rstrip("/")
        client = self._endpoints.get(key)
        if client is None:
            client = self.http(key)
        self._endpoints[base_url] = client
        return client

    def http(self, base_url: str) -> HttpModelClient:
        """The HTTP client of the server at ``base_url`` (one replica, for preflight checks and other routes)."""
        key = base_url.rstrip("/")
        client = self._http.get(key)
        if client is None:
            registered = self._endpoints.get(key)
            if registered is not None and not isinstance(registered, ReplicaRouter):
                raise TypeError(f"{base_url} is served by {type(registered).__name__}, not over HTTP")
            client = HttpModelClient(
                key,
                timeout=self.timeout,
                max_requests=self.max_requests,
                adapt_requests=self.adapt_requests,
                retry=self.retry,
                max_outage=self.max_outage,
            )
            for listener in self._listeners:
                client.gate.subscribe(listener)
            self._http[key] = client
            self._endpoints.setdefault(key, client)
        return client

    def route(self, base_urls: Sequence[str]) -> str:
        """Serve ``base_urls`` (replicas of one model) as one logical endpoint; returns its key.

        The key is the first replica's URL: requests whose ``base_url`` is it go
        through the router, each replica keeping its own request limit and gate.
        One URL needs no router: it is its own key.
        """
        keys = [url.rstrip("/") for url in base_urls]
        if not keys:
            raise ValueError("route() needs at least one base URL")
        if len(keys) == 1:
            self.http(keys[0])
            return keys[0]
        existing = self._routers.get(keys[0])
        if existing is not None and [replica.base_url for replica in existing.replicas] == keys:
            return keys[0]
        router = ReplicaRouter([self.http(key) for key in keys])
        self._routers[keys[0]] = router
        self._endpoints = {url: client for url, client in self._endpoints.items() if url.rstrip("/") != keys[0]}
        self._endpoints[keys[0]] = router
        return keys[0]

    def replicas(self, base_url: str) -> tuple[str, ...]:
        """The servers behind ``base_url``: its replicas, or itself."""
        key = base_url.rstrip("/")
        router = self._routers.get(key)
        return tuple(replica.base_url for replica in router.replicas) if router is not None else (key,)

    def register(self, base_url: str, client: ModelClient) -> None:
        """Route a base URL to a custom client (an in-process policy, say)."""
        key = base_url.rstrip("/")
        self._endpoints = {url: known for url, known in self._endpoints.items() if url.rstrip("/") != key}
        self._endpoints[key] = client

    def end_rollout(self, base_url: str, rollout_id: str) -> None:
        """``rollout_id`` sends no more requests to ``base_url``: a slot its server's client kept for it is freed."""
        key = base_url.rstrip("/")
        router = self._routers.get(key)
        for client in router.replicas if router is not None else (self._http.get(key),):
            if client is not None:
                client.end_rollout(rollout_id)

    def gate(self, base_url: str) -> EndpointGate:
        return self.http(base_url).gate

    def failed(self, base_url: str) -> bool:
        """Whether requests for ``base_url`` fail now: its server (or every replica) is down past its budget."""
        key = base_url.rstrip("/")
        router = self._routers.get(key)
        if router is not None:
            return router.failed
        client = self._http.get(key)
        return client is not None and client.gate.failed

    def waiting(self, base_url: str) -> int:
        """Requests for ``base_url`` waiting for a server to come back."""
        key = base_url.rstrip("/")
        router = self._routers.get(key)
        if router is not None:
            return router.waiting
        client = self._http.get(key)
        return client.gate.waiting if client is not None else 0

    def subscribe(self, listener: Callable[[GateEvent, Outage], None]) -> None:
        """Hear of every server going down, coming back or failing past its outage budget."""
        self._listeners.append(listener)
        for client in self._http.values():
            client.gate.subscribe(listener)

    def outages(self) -> list[Outage]:
        return [outage for client in self._http.values() for outage in client.gate.all_outages()]

    def stats(self) -> dict[str, Any]:
        """Requests, retries and failures summed over the pool, and per server under ``endpoints``."""
        return self.totals().to_json()

    def totals(self) -> PoolStats:
        """Requests, retries and failures summed over the pool; per server when there is more than one."""
        parts: list[PoolStats] = []
        endpoints: dict[str, PoolStats] = {}
        clients = [*self._http.values(), *(c for c in self._endpoints.values() if not isinstance(c, HttpModelClient))]
        for client in {id(client): client for client in clients}.values():
            stats = getattr(client, "stats", None)
            if isinstance(stats, ClientStats):
                parts.append(PoolStats.of(stats))
                if isinstance(client, HttpModelClient):
                    endpoints[client.base_url] = parts[-1]
        parts.extend(PoolStats(failures=router.failures, rerouted=router.rerouted) for router in self._routers.values())
        merged = PoolStats.merge(parts)
        queued = sum(client.queued for client in self._http.values())
        return replace(merged, endpoints=endpoints if len(endpoints) > 1 else {}, queued=queued)

    async def aclose(self) -> None:
        """Close every connection and stop every probe; gates and routers stay for another use."""
        clients = {id(client): client for client in [*self._http.values(), *self._endpoints.values()]}
        custom = [
            url for url, client in self._endpoints.items() if not isinstance(client, HttpModelClient | ReplicaRouter)
        ]
        for url in custom:
            del self._endpoints[url]
        for client in clients.values():
            if not isinstance(client, ReplicaRouter):
                await client.aclose()
