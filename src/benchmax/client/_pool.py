"""One client per endpoint, shared by every rollout that targets it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmax.client._gate import DEFAULT_MAX_OUTAGE, EndpointGate, GateEvent, Outage
from benchmax.client._http import ClientStats, HttpModelClient
from benchmax.client._retry import RetryPolicy
from benchmax.client._types import ModelClient


class ClientPool:
    """Model clients by base URL: one connection pool, concurrency limit and health gate each.

    Credentials are per request (a rollout's ``model_auth``), so one endpoint
    keeps one pool whatever keys its requests carry.
    """

    def __init__(
        self,
        *,
        timeout: float = 600.0,
        max_concurrency: int = 256,
        retry: RetryPolicy | None = None,
        max_outage: float = DEFAULT_MAX_OUTAGE,
    ) -> None:
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.retry = retry
        self.max_outage = max_outage
        self._clients: dict[str, ModelClient] = {}
        self._listeners: list[Callable[[GateEvent, Outage], None]] = []

    def get(self, base_url: str) -> ModelClient:
        key = base_url.rstrip("/")
        client = self._clients.get(key)
        if client is None:
            client = HttpModelClient(
                key,
                timeout=self.timeout,
                max_concurrency=self.max_concurrency,
                retry=self.retry,
                max_outage=self.max_outage,
            )
            for listener in self._listeners:
                client.gate.subscribe(listener)
            self._clients[key] = client
        return client

    def http(self, base_url: str) -> HttpModelClient:
        """The HTTP client of ``base_url`` (for preflight checks and other routes)."""
        client = self.get(base_url)
        if not isinstance(client, HttpModelClient):
            raise TypeError(f"{base_url} is served by {type(client).__name__}, not over HTTP")
        return client

    def register(self, base_url: str, client: ModelClient) -> None:
        """Route a base URL to a custom client (an in-process policy, say)."""
        self._clients[base_url.rstrip("/")] = client

    def gate(self, base_url: str) -> EndpointGate:
        return self.http(base_url).gate

    def subscribe(self, listener: Callable[[GateEvent, Outage], None]) -> None:
        """Hear of every endpoint going down, coming back or failing past its outage budget."""
        self._listeners.append(listener)
        for client in self._clients.values():
            if isinstance(client, HttpModelClient):
                client.gate.subscribe(listener)

    def outages(self) -> list[Outage]:
        return [
            outage
            for client in self._clients.values()
            if isinstance(client, HttpModelClient)
            for outage in client.gate.all_outages()
        ]

    def stats(self) -> dict[str, Any]:
        merged: dict[str, Any] = {"requests": 0, "retries": Counter(), "failures": Counter(), "resent": 0}
        for client in self._clients.values():
            stats = getattr(client, "stats", None)
            if isinstance(stats, ClientStats):
                merged["requests"] += stats.requests
                merged["retries"].update(stats.retries)
                merged["failures"].update(stats.failures)
                merged["resent"] += stats.resent
        merged["retries"] = dict(merged["retries"])
        merged["failures"] = dict(merged["failures"])
        return merged

    async def aclose(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.aclose()
