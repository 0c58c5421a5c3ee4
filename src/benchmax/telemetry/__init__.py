"""OpenTelemetry traces of rollouts: one trace per rollout, exported over OTLP/HTTP when asked.

An edge package: the engine and the model client call into it where the mechanisms
run (a rollout, its context, its tool calls, its reward, a chat completion); the
runner starts and flushes the exporter around a run. The contract (``benchmax.envs``)
knows nothing of it: the rollout's root span rides on ``RolloutScope.trace`` as an
opaque value. Off (no ``--otel-endpoint``, no ``OTEL_EXPORTER_OTLP_*ENDPOINT``) the SDK
is never loaded and each hook is a ``None`` check. See docs/telemetry.md.
"""

from benchmax.telemetry._export import MAX_QUEUE, TelemetrySession, shown_url, start_telemetry, stop_telemetry
from benchmax.telemetry._settings import (
    DEFAULT_EXPORT_TIMEOUT,
    ExportTarget,
    TelemetryError,
    TelemetrySettings,
    export_target,
)
from benchmax.telemetry._spans import (
    CACHE_HIT,
    ENV_TURN_PREFIX,
    MAX_CONTENT_CHARS,
    REWARD_PREFIX,
    ChatReply,
    cached_model_call,
    content_enabled,
    end_model_call,
    end_rollout,
    env_turn_result,
    env_turn_span,
    fail_model_call,
    fail_span,
    finish_model_call,
    group_span,
    leave_rollout,
    span,
    start_model_call,
    start_rollout,
    tool_result,
    tool_span,
    trace_id,
    traced_context,
    traced_model_call,
    tracer,
)

__all__ = [
    "CACHE_HIT",
    "DEFAULT_EXPORT_TIMEOUT",
    "ENV_TURN_PREFIX",
    "MAX_CONTENT_CHARS",
    "MAX_QUEUE",
    "REWARD_PREFIX",
    "ChatReply",
    "ExportTarget",
    "TelemetryError",
    "TelemetrySession",
    "TelemetrySettings",
    "cached_model_call",
    "content_enabled",
    "end_model_call",
    "end_rollout",
    "env_turn_result",
    "env_turn_span",
    "export_target",
    "fail_model_call",
    "fail_span",
    "finish_model_call",
    "group_span",
    "leave_rollout",
    "shown_url",
    "span",
    "start_model_call",
    "start_rollout",
    "start_telemetry",
    "stop_telemetry",
    "tool_result",
    "tool_span",
    "trace_id",
    "traced_context",
    "traced_model_call",
    "tracer",
]
