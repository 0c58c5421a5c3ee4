"""What a pool of model clients did, as one record with one way to add two of them up.

A run's request counters are summed in two places: over the clients of one pool
(``ClientPool.totals``) and over the pools of the actors of a Ray run (the Ray
executor). Both use :meth:`PoolStats.merge`, so the two sums cannot follow
different rules; ``to_json`` is the shape ``ClientPool.stats()`` and
``RunResult.client_stats`` have always had.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmax.client._calls import CallFigures, merge_figures
from benchmax.client._http import ClientStats

__all__ = ["PoolStats"]


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Model requests, retries and failures (by cause), summed; per server under ``endpoints``."""

    requests: int = 0
    retries: Mapping[str, int] = field(default_factory=dict)
    failures: Mapping[str, int] = field(default_factory=dict)
    resent: int = 0
    """Requests sent again after their endpoint came back (not counted as retries)."""
    rerouted: int = 0
    """Requests a replica router sent to another replica after theirs went down."""
    endpoints: Mapping[str, PoolStats] = field(default_factory=dict)
    """Per server, when requests went to more than one."""
    calls: tuple[CallFigures, ...] | None = None
    """Every model call per role and model, where the caller keeps a ledger (an executor does)."""
    queued: int = 0
    """Requests waiting for a slot at this moment (rollouts waiting for the model): a gauge, not a count."""

    @classmethod
    def of(cls, counters: ClientStats) -> PoolStats:
        """What one client's live counters say now."""
        return cls(counters.requests, dict(counters.retries), dict(counters.failures), counters.resent)

    @classmethod
    def merge(cls, parts: Iterable[PoolStats]) -> PoolStats:
        """The sum of ``parts``: counters add, servers add per URL, call figures add per role and model."""
        parts = list(parts)
        retries: Counter[str] = Counter()
        failures: Counter[str] = Counter()
        endpoints: dict[str, list[PoolStats]] = {}
        for part in parts:
            retries.update(part.retries)
            failures.update(part.failures)
            for url, figures in part.endpoints.items():
                endpoints.setdefault(url, []).append(figures)
        calls = [part.calls for part in parts if part.calls is not None]
        return cls(
            requests=sum(part.requests for part in parts),
            retries=dict(retries),
            failures=dict(failures),
            resent=sum(part.resent for part in parts),
            rerouted=sum(part.rerouted for part in parts),
            endpoints={url: cls.merge(figures) for url, figures in endpoints.items()},
            calls=merge_figures(*calls) if calls else None,
            queued=sum(part.queued for part in parts),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "requests": self.requests,
            "retries": dict(self.retries),
            "failures": dict(self.failures),
            "resent": self.resent,
        }
        if self.rerouted:
            data["rerouted"] = self.rerouted
        if self.endpoints:
            data["endpoints"] = {url: figures.to_json() for url, figures in self.endpoints.items()}
        if self.calls is not None:
            data["calls"] = [figures.to_dict() for figures in self.calls]
        if self.queued:
            data["queued"] = self.queued
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PoolStats:
        calls = data.get("calls")
        return cls(
            requests=int(data.get("requests", 0)),
            retries=dict(data.get("retries") or {}),
            failures=dict(data.get("failures") or {}),
            resent=int(data.get("resent", 0)),
            rerouted=int(data.get("rerouted", 0)),
            endpoints={url: cls.from_json(figures) for url, figures in (data.get("endpoints") or {}).items()},
            calls=None if calls is None else tuple(CallFigures.from_dict(item) for item in calls),
            queued=int(data.get("queued", 0)),
        )
