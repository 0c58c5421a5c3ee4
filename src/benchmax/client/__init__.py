"""The model client: how benchmax talks to an OpenAI-compatible endpoint.

A leaf beside the contract: the engine, LLM judges (``benchmax.rewards``) and
the trainers' vLLM policies all use it. One pooled client per endpoint, retries
with backoff and a budget, a health gate that holds requests while the
endpoint is down instead of failing them, and a router that spreads one
logical endpoint's requests over several replicas.
"""

from benchmax.client._gate import (
    DEFAULT_MAX_OUTAGE,
    ON_HOLD,
    EndpointGate,
    FailureKind,
    GateEvent,
    HoldClock,
    Outage,
)
from benchmax.client._http import DEFAULT_CONNECT_TIMEOUT, ClientStats, HttpModelClient
from benchmax.client._pool import ClientPool
from benchmax.client._retry import RetryPolicy
from benchmax.client._router import ReplicaRouter
from benchmax.client._types import ChatResult, EndpointDown, ModelClient, ModelError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_OUTAGE",
    "ON_HOLD",
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
    "Outage",
    "ReplicaRouter",
    "RetryPolicy",
]
