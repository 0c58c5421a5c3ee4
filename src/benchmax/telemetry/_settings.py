"""Where traces go: the ``--otel-endpoint`` setting, or the standard ``OTEL_*`` variables, or nowhere."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from benchmax.errors import BenchmaxError

TRACES_PATH = "v1/traces"
DEFAULT_EXPORT_TIMEOUT = 5.0
"""Seconds one export may take (``OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`` overrides it): a receiver
that is down costs the run at most this once, at its end."""


class TelemetryError(BenchmaxError, ValueError):
    """A telemetry setting that cannot be used (an endpoint that is not an http(s) URL)."""


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What a run was told about tracing; typed so it can travel inside ``EngineConfig``.

    ``endpoint`` is an OTLP/HTTP endpoint: a base URL (``http://collector:4318``, to which
    ``/v1/traces`` is added, as for ``OTEL_EXPORTER_OTLP_ENDPOINT``) or the full traces URL.
    ``None`` leaves the choice to the standard variables. ``content`` records prompts,
    completions and tool arguments/results on the spans (off: they may hold private data).
    """

    endpoint: str | None = None
    content: bool = False

    def __post_init__(self) -> None:
        if self.endpoint is not None and not self.endpoint.startswith(("http://", "https://")):
            raise TelemetryError(
                f"--otel-endpoint must be an http:// or https:// URL (OTLP over HTTP), got {self.endpoint!r:.200}"
            )


@dataclass(frozen=True, slots=True)
class ExportTarget:
    """The traces URL spans are sent to, and the export timeout."""

    url: str
    timeout: float


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _traces_url(base: str) -> str:
    base = base.strip()
    if base.rstrip("/").endswith("/" + TRACES_PATH):
        return base
    return f"{base.rstrip('/')}/{TRACES_PATH}"


def export_target(settings: TelemetrySettings | None, environ: Mapping[str, str] | None = None) -> ExportTarget | None:
    """Where to export, or ``None``: tracing is off (no endpoint, ``OTEL_SDK_DISABLED=true``,
    or ``OTEL_TRACES_EXPORTER=none``)."""
    env = os.environ if environ is None else environ
    if _truthy(env.get("OTEL_SDK_DISABLED")) or env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if settings is not None and settings.endpoint:
        url = _traces_url(settings.endpoint)
    elif env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        url = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()  # a signal URL is used as given (the spec's rule)
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        url = _traces_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    else:
        return None
    timeout = DEFAULT_EXPORT_TIMEOUT
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = env.get(name, "").strip()
        if raw:
            try:
                timeout = float(raw)
            except ValueError:
                raise TelemetryError(f"{name}={raw!r:.40} is not a number of seconds") from None
            if not timeout > 0:
                raise TelemetryError(f"{name} must be > 0 seconds, got {raw!r:.40}")
            break
    return ExportTarget(url, timeout)
