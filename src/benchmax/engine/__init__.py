"""The rollout engine: model loop, model client, tools and log capture.

It knows the env contract and nothing of the store or the faces above it.
"""

from benchmax.engine.client import (
    ChatResult,
    ClientPool,
    HttpModelClient,
    ModelClient,
    ModelError,
    RetryPolicy,
)
from benchmax.engine.engine import Engine, EngineConfig, GroupResult, StoredRollout

__all__ = [
    "ChatResult",
    "ClientPool",
    "Engine",
    "EngineConfig",
    "GroupResult",
    "HttpModelClient",
    "ModelClient",
    "ModelError",
    "RetryPolicy",
    "StoredRollout",
]
