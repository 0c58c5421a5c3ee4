"""What an engine is told: time limits, size bounds and the retry policy, each with a safe default."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from benchmax.client import DEFAULT_MAX_OUTAGE as _DEFAULT_MAX_OUTAGE
from benchmax.client import ClientPool, RetryPolicy
from benchmax.telemetry import TelemetrySettings


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Time limits, size bounds and retry policy; every field has a safe default."""

    request_timeout: float = 600.0
    """Seconds for one model request (each retry gets its own)."""
    tool_timeout: float | None = 300.0
    """Seconds for one tool call; past it the rollout ends as ``timeout``."""
    env_response_timeout: float | None = 300.0
    """Seconds for one ``env_response`` call (an env's answer to a turn); past it the rollout
    ends as ``timeout``."""
    rollout_timeout: float | None = None
    """Seconds for a whole rollout, context and scoring included; time its requests spend
    waiting for a down endpoint does not count."""
    max_requests: int = 256
    """Requests in flight per endpoint, shared by all rollouts (vLLM's default
    ``max_num_seqs`` is 256: more only queues inside the server)."""
    adapt_requests: bool = True
    """Send fewer than ``max_requests`` while this process's event loop is
    saturated, where more would only queue here (``benchmax.client.RequestLimit``)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_outage: float = _DEFAULT_MAX_OUTAGE
    """Seconds an endpoint may stay down while its requests wait; past it they fail."""
    max_content_chars: int = 200_000
    """Model text kept per message (longer is truncated, and marked)."""
    max_tool_result_chars: int = 100_000
    """Tool result text kept and sent back per call (longer is truncated, and marked)."""
    max_log_records: int = 1000
    log_level: int = logging.INFO
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    """Where rollout traces go (``--otel-endpoint``, ``--otel-content``); the runner starts the
    exporter. Not stored with a run: the endpoint is the user's, and may carry credentials."""

    def client_pool(self) -> ClientPool:
        """The model clients these limits ask for (an engine's own, or a run's shared by its engines)."""
        return ClientPool(
            timeout=self.request_timeout,
            max_requests=self.max_requests,
            adapt_requests=self.adapt_requests,
            retry=self.retry,
            max_outage=self.max_outage,
        )

    def __post_init__(self) -> None:
        for name in ("request_timeout", "tool_timeout", "env_response_timeout", "rollout_timeout", "max_outage"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"EngineConfig.{name} must be > 0 seconds or None, got {value!r}")
        for name in ("max_requests", "max_content_chars", "max_tool_result_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineConfig.{name} must be >= 1")
