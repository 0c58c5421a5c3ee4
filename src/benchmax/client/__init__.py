"""The model client: how benchmax talks to an OpenAI-compatible endpoint.

A leaf beside the contract: the engine, LLM judges (``benchmax.rewards``) and
the trainers' vLLM policies all use it. One pooled client per endpoint, retries
with backoff and a budget, a health gate that holds requests while the
endpoint is down instead of failing them, and a router that spreads one
logical endpoint's requests over several replicas. Around them, a run's
:class:`CallLedger` counts and prices every call (:class:`PriceTable`) and
answers repeats from the on-disk :class:`ResponseCache`.
"""

from benchmax.client._cache import (
    CACHE_FILE,
    CACHE_FORMAT,
    DEFAULT_MAX_BYTES,
    UNSEEDED,
    CacheError,
    CacheSettings,
    ResponseCache,
    Unseeded,
    request_key,
)
from benchmax.client._calls import (
    ROLES,
    CallFigures,
    CallLedger,
    CallLog,
    CallMeter,
    Role,
    calls_from_meta,
    calls_to_meta,
    known_usd,
    merge_figures,
    scoped_client,
    total_usd,
)
from benchmax.client._gate import (
    DEFAULT_MAX_OUTAGE,
    EndpointGate,
    FailureKind,
    GateEvent,
    Outage,
)
from benchmax.client._http import DEFAULT_CONNECT_TIMEOUT, ClientStats, HttpModelClient
from benchmax.client._limit import RequestLimit
from benchmax.client._models import ModelNotServed, ServedModel, choose_model, lists_models, parse_models
from benchmax.client._pool import ClientPool
from benchmax.client._prices import DEFAULT_PRICES, PRICES_ENV, ModelPrice, PriceTable, PriceTableError
from benchmax.client._retry import RetryPolicy
from benchmax.client._router import ReplicaRouter
from benchmax.client._stats import PoolStats
from benchmax.client._types import ChatResult, EndpointDown, ModelClient, ModelError
from benchmax.envs import HoldClock

__all__ = [
    "CACHE_FILE",
    "CACHE_FORMAT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_OUTAGE",
    "DEFAULT_PRICES",
    "PRICES_ENV",
    "ROLES",
    "UNSEEDED",
    "CacheError",
    "CacheSettings",
    "CallFigures",
    "CallLedger",
    "CallLog",
    "CallMeter",
    "ChatResult",
    "ClientPool",
    "ClientStats",
    "EndpointDown",
    "EndpointGate",
    "FailureKind",
    "GateEvent",
    "HoldClock",
    "HttpModelClient",
    "ModelClient",
    "ModelError",
    "ModelNotServed",
    "ModelPrice",
    "Outage",
    "PoolStats",
    "PriceTable",
    "PriceTableError",
    "ReplicaRouter",
    "RequestLimit",
    "ResponseCache",
    "RetryPolicy",
    "Role",
    "ServedModel",
    "Unseeded",
    "calls_from_meta",
    "calls_to_meta",
    "choose_model",
    "known_usd",
    "lists_models",
    "merge_figures",
    "parse_models",
    "request_key",
    "scoped_client",
    "total_usd",
]
