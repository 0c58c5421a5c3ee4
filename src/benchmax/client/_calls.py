"""Every model call of a run, counted and priced, and answered from the response cache when it can be.

A :class:`CallLedger` belongs to one run (one per process: the driver, each
Ray actor). The executor opens a :meth:`CallLedger.group` scope around each
group it runs; inside it, :func:`scoped_client` wraps a model client so each
call is looked up in the cache, sent on a miss, stored when complete, and
counted by *role* (``policy``: the env's model turns; ``judge``: calls of
``benchmax.rewards.Judge``) and by the rollout it served. The scope is a
context variable, so every call made while the group runs (tool code, reward
code, a judge deep inside a rubric) finds it without being handed anything,
and code outside a run (a trainer, a script) gets the plain client back.

Costs are priced when the reply arrives, with the run's :class:`PriceTable`:
a reply from the cache costs 0 (it is counted as a cache hit), a model the
table does not price has an unknown cost (``usd=None``), never 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from benchmax.auth import ModelAuth
from benchmax.client._cache import CacheSettings, ResponseCache, UncacheableRequest, request_key, samples
from benchmax.client._prices import PriceTable
from benchmax.client._types import ChatResult, ModelClient
from benchmax.envs import Usage, current_scope
from benchmax.telemetry import cached_model_call

logger = logging.getLogger("benchmax.client")

Role = Literal["policy", "judge"]
ROLES: tuple[Role, ...] = ("policy", "judge")


@dataclass(frozen=True, slots=True)
class CallFigures:
    """Model calls of one role and model (of a rollout, a group or a run).

    ``requests`` were answered by the model server (and cost ``usd``);
    ``cache_hits`` were answered by the response cache (free); ``cache_misses``
    were looked up and sent. Tokens are those of the requests sent.
    """

    role: str
    model: str
    requests: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    usd: float | None = 0.0
    """Dollars spent; ``None``: unknown (the price table has no entry for ``model``)."""

    def __add__(self, other: CallFigures) -> CallFigures:
        return CallFigures(
            self.role,
            self.model,
            self.requests + other.requests,
            self.cache_hits + other.cache_hits,
            self.cache_misses + other.cache_misses,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            None if self.usd is None or other.usd is None else self.usd + other.usd,
        )

    def to_dict(self) -> dict[str, Any]:
        # by hand: every rollout stores one, and ``dataclasses.asdict`` deep-copies each field
        return {
            "role": self.role,
            "model": self.model,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "usd": self.usd,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallFigures:
        names = cls.__dataclass_fields__
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True, slots=True)
class CallLog:
    """The model calls of one group, per rollout (``None``: calls of the group's own hooks)."""

    lines: tuple[tuple[str | None, CallFigures], ...] = ()

    def of(self, rollout_id: str | None) -> tuple[CallFigures, ...]:
        return tuple(figures for owner, figures in self.lines if owner == rollout_id)

    def figures(self) -> tuple[CallFigures, ...]:
        """Every call of the group, summed per role and model."""
        return merge_figures(figures for _, figures in self.lines)


def merge_figures(*parts: Iterable[CallFigures]) -> tuple[CallFigures, ...]:
    """Figures summed per (role, model), in that order."""
    merged: dict[tuple[str, str], CallFigures] = {}
    for part in parts:
        for figures in part:
            key = (figures.role, figures.model)
            merged[key] = merged[key] + figures if key in merged else figures
    return tuple(merged[key] for key in sorted(merged))


def total_usd(figures: Iterable[CallFigures]) -> float | None:
    """Dollars of all of them; ``None`` when any part is unknown."""
    total = 0.0
    for item in figures:
        if item.usd is None:
            return None
        total += item.usd
    return total


def known_usd(figures: Iterable[CallFigures]) -> float:
    return sum(item.usd for item in figures if item.usd is not None)


def calls_to_meta(figures: Iterable[CallFigures]) -> dict[str, Any]:
    """The JSON form a run keeps: the total (``None``: unknown), what is known of it, and each part."""
    items = tuple(figures)
    return {
        "usd": total_usd(items),
        "known_usd": known_usd(items),
        "unpriced": sorted({item.model for item in items if item.usd is None}),
        "calls": [item.to_dict() for item in items],
    }


def calls_from_meta(data: Mapping[str, Any] | None) -> tuple[CallFigures, ...]:
    if not data:
        return ()
    return tuple(CallFigures.from_dict(item) for item in data.get("calls") or ())


class _Counts:
    __slots__ = ("cache_hits", "cache_misses", "cached_tokens", "completion_tokens", "prompt_tokens", "requests", "usd")

    def __init__(self) -> None:
        self.requests = self.cache_hits = self.cache_misses = 0
        self.prompt_tokens = self.completion_tokens = self.cached_tokens = 0
        self.usd: float | None = 0.0

    def add(self, usage: Usage | None, usd: float | None, *, hit: bool, looked_up: bool) -> None:
        if hit:
            self.cache_hits += 1
            return
        if looked_up:
            self.cache_misses += 1
        if usage is not None:
            self.requests += 1
            self.prompt_tokens += usage.prompt_tokens
            self.completion_tokens += usage.completion_tokens
            self.cached_tokens += usage.cached_tokens
            self.usd = None if usd is None or self.usd is None else self.usd + usd

    def freeze(self, role: str, model: str) -> CallFigures:
        return CallFigures(
            role,
            model,
            self.requests,
            self.cache_hits,
            self.cache_misses,
            self.prompt_tokens,
            self.completion_tokens,
            self.cached_tokens,
            self.usd,
        )


class CallMeter:
    """The calls of one group as they happen; :meth:`log` freezes them."""

    def __init__(self, ledger: CallLedger) -> None:
        self.ledger = ledger
        self._counts: dict[tuple[str | None, str, str], _Counts] = {}

    def add(
        self,
        owner: str | None,
        role: str,
        model: str,
        usage: Usage | None,
        usd: float | None,
        *,
        hit: bool = False,
        looked_up: bool = False,
    ) -> None:
        counts = self._counts.get((owner, role, model))
        if counts is None:
            counts = self._counts[(owner, role, model)] = _Counts()
        counts.add(usage, usd, hit=hit, looked_up=looked_up)
        self.ledger._add(role, model, usage, usd, hit=hit, looked_up=looked_up)

    def log(self) -> CallLog:
        return CallLog(
            tuple((owner, counts.freeze(role, model)) for (owner, role, model), counts in self._counts.items())
        )


_METER: ContextVar[CallMeter | None] = ContextVar("benchmax_call_meter", default=None)


class CallLedger:
    """One run's model calls in this process: the response cache, the price table, running totals.

    ``cache`` ``None`` turns the cache off; ``prices`` ``None`` leaves every cost
    unknown. :meth:`subscribe` hears of every call as it is counted (the runner's
    ``--max-cost`` watch).
    """

    def __init__(self, *, prices: PriceTable | None = None, cache: CacheSettings | None = None) -> None:
        self.prices = prices
        self.settings = cache
        self.cache = ResponseCache(cache) if cache is not None else None
        self._totals: dict[tuple[str, str], _Counts] = {}
        self._listeners: list[Callable[[], None]] = []

    def open(self) -> None:
        """Open the cache now, so a directory that cannot hold one fails before any rollout."""
        if self.cache is not None:
            self.cache.open()

    @contextmanager
    def group(self) -> Iterator[CallMeter]:
        """Count (and cache) every call made inside, from any task started inside."""
        meter = CallMeter(self)
        token = _METER.set(meter)
        try:
            yield meter
        finally:
            _METER.reset(token)

    def totals(self) -> tuple[CallFigures, ...]:
        """Every call so far, per role and model."""
        return tuple(self._totals[key].freeze(*key) for key in sorted(self._totals))

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def _add(
        self, role: str, model: str, usage: Usage | None, usd: float | None, *, hit: bool, looked_up: bool
    ) -> None:
        counts = self._totals.get((role, model))
        if counts is None:
            counts = self._totals[(role, model)] = _Counts()
        counts.add(usage, usd, hit=hit, looked_up=looked_up)
        for listener in self._listeners:
            listener()

    def _cost(self, model: str, usage: Usage) -> float | None:
        if self.prices is None:
            return None
        return self.prices.cost(model, usage)

    def _key(self, role: Role, body: Mapping[str, Any], draw: str | None) -> str | None:
        settings = self.settings
        if self.cache is None or settings is None or (role == "judge" and not settings.judge):
            return None
        sampled = samples(body)
        if sampled and settings.unseeded == "skip":
            return None
        try:
            return request_key(body, draw=(draw or "") if sampled else None)
        except UncacheableRequest as exc:
            logger.debug("request not cached: %s", exc)
            return None

    async def call(
        self,
        meter: CallMeter,
        client: ModelClient,
        role: Role,
        body: dict[str, Any],
        rollout_id: str | None,
        auth: ModelAuth | None,
    ) -> ChatResult:
        model = str(body.get("model") or "")
        current = current_scope().rollout_id
        owner = current if current is not None else (rollout_id if role == "policy" else None)
        key = self._key(role, body, owner or rollout_id)
        if key is not None:
            assert self.cache is not None
            hit = await self.cache.get(key)
            if hit is not None:
                meter.add(owner, role, model, None, 0.0, hit=True)
                cached_model_call(body, hit)
                return hit
        if auth is None:
            result = await client.chat(body, rollout_id=rollout_id)
        else:
            result = await client.chat(body, rollout_id=rollout_id, auth=auth)
        meter.add(owner, role, model, result.usage, self._cost(model, result.usage), looked_up=key is not None)
        if key is not None:
            assert self.cache is not None
            await self.cache.put(key, result, model=model)
        return result


class _ScopedClient:
    """A model client whose calls go through the ledger of the group being run."""

    __slots__ = ("_client", "_role")

    def __init__(self, client: ModelClient, role: Role) -> None:
        self._client = client
        self._role = role

    def __repr__(self) -> str:
        return f"scoped_client({self._client!r}, role={self._role!r})"

    async def chat(
        self, body: dict[str, Any], *, rollout_id: str | None = None, auth: ModelAuth | None = None
    ) -> ChatResult:
        meter = _METER.get()
        if meter is None:
            if auth is None:
                return await self._client.chat(body, rollout_id=rollout_id)
            return await self._client.chat(body, rollout_id=rollout_id, auth=auth)
        return await meter.ledger.call(meter, self._client, self._role, body, rollout_id, auth)

    async def aclose(self) -> None:
        """The wrapped client belongs to whoever made it: closing the wrapper leaves it open."""


def scoped_client(client: ModelClient, *, role: Role) -> ModelClient:
    """``client`` with its calls counted, priced and cached by the run's ledger, for ``role``.

    Outside a :meth:`CallLedger.group` scope (training, a script) it is ``client`` itself.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if _METER.get() is None:
        return client
    return _ScopedClient(client, role)
