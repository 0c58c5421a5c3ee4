"""The exporting side: one SDK tracer provider per process while a run wants traces, flushed at its end.

Nothing here is imported or built until a run asks for traces: with no endpoint the
SDK is never loaded and the instrumentation sees ``None`` (``_spans.tracer()``).
Export runs on the batch processor's thread, with a bounded queue (a full queue drops
spans, it never blocks a rollout) and an export timeout; a receiver that is down is
reported once, with its URL stripped of user info and query, and the run goes on.
The standard ``OTEL_EXPORTER_OTLP_HEADERS`` (which carry keys) are read by the
exporter itself and never pass through benchmax's logs or store.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from benchmax.telemetry import _spans
from benchmax.telemetry._settings import ExportTarget, TelemetryError, TelemetrySettings, export_target

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

logger = logging.getLogger("benchmax.telemetry")

MAX_QUEUE = 8192
"""Spans waiting for export; past it new spans are dropped (a stalled receiver costs memory, bounded)."""
_OTEL_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.sdk._shared_internal",
)
"""The exporter's own loggers, which say a failure per batch and per retry: while a session
exports, benchmax says it once instead."""


def shown_url(url: str) -> str:
    """``url`` without user info, query or fragment: what a log line may show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _exporter_class() -> type[SpanExporter]:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class ReportingExporter(SpanExporter):
        """Delegates to the OTLP exporter; says the first failure once, and skips export while the
        receiver stays down (one slow attempt per ``timeout``, not one per batch)."""

        def __init__(self, inner: SpanExporter, url: str, timeout: float) -> None:
            self._inner = inner
            self._url = url
            self._timeout = timeout
            self._lock = threading.Lock()
            self._down_until = 0.0
            self.failed = 0
            self.exported = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            import time

            if time.monotonic() < self._down_until:
                self.failed += len(spans)
                return SpanExportResult.FAILURE
            try:
                result = self._inner.export(spans)
            except Exception as exc:  # an exporter bug must not take the processor's thread down
                result = SpanExportResult.FAILURE
                logger.debug("OTLP export raised %s", type(exc).__name__)
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
                return result
            with self._lock:
                first = self.failed == 0
                self.failed += len(spans)
                self._down_until = time.monotonic() + self._timeout
            if first:
                logger.warning(
                    "telemetry: could not export traces to %s; the run goes on, and spans that cannot be "
                    "sent are dropped (said once)",
                    shown_url(self._url),
                )
            return result

        def shutdown(self) -> None:
            self._inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self._inner.force_flush(timeout_millis)

    return ReportingExporter


class TelemetrySession:
    """The process's exporting tracer while one or more runs want traces (counted: nested runs share it)."""

    def __init__(self, target: ExportTarget, content: bool) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from benchmax import __version__

        self.target = target
        self.content = content
        self.users = 0
        resource = Resource.create({"service.version": __version__})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "benchmax"}))
        inner = OTLPSpanExporter(endpoint=target.url, timeout=target.timeout)
        self.exporter: Any = _exporter_class()(inner, target.url, target.timeout)
        self.processor: BatchSpanProcessor = BatchSpanProcessor(
            self.exporter,
            max_queue_size=MAX_QUEUE,
            export_timeout_millis=target.timeout * 1000,
        )
        self.provider: TracerProvider = TracerProvider(resource=resource)
        self.provider.add_span_processor(self.processor)
        self._quiet = _Quiet()
        for name in _OTEL_LOGGERS:
            logging.getLogger(name).addFilter(self._quiet)
        self.tracer = self.provider.get_tracer("benchmax", __version__)

    def close(self) -> None:
        """Export what is queued, then stop: one export timeout at most when the receiver is down
        (after one failed export the others are skipped, see ``ReportingExporter``)."""
        try:
            self.processor.shutdown()
        finally:
            for name in _OTEL_LOGGERS:
                logging.getLogger(name).removeFilter(self._quiet)


_LOCK = threading.Lock()
_SESSION: TelemetrySession | None = None


_MISSING = (
    "tracing needs OpenTelemetry, which is not installed: pip install 'benchmax[otel]' "
    "(the SDK and the OTLP/HTTP exporter)"
)


@functools.cache
def _warn_missing() -> None:
    logger.warning("telemetry: OTEL_EXPORTER_OTLP_*ENDPOINT is set but %s; not tracing", _MISSING)


def start_telemetry(settings: TelemetrySettings | None) -> TelemetrySession | None:
    """Start exporting for a run (or join the run already exporting); ``None`` when tracing is off.

    Pair each session returned with :func:`stop_telemetry`.
    """
    global _SESSION
    target = export_target(settings)
    if target is None:
        return None
    if not _spans.AVAILABLE:
        if settings is not None and settings.endpoint is not None:
            raise TelemetryError(_MISSING)
        _warn_missing()  # asked by an OTEL_* variable set for other programs too: the run goes on untraced
        return None
    content = bool(settings is not None and settings.content)
    with _LOCK:
        session = _SESSION
        if session is None:
            session = _SESSION = TelemetrySession(target, content)
            _spans.install(session.tracer, content)
            logger.info("telemetry: exporting traces to %s", shown_url(target.url))
        session.users += 1
        return session


def stop_telemetry(session: TelemetrySession | None) -> None:
    """The run is done with tracing: the last one out flushes and stops the exporter."""
    global _SESSION
    if session is None:
        return
    with _LOCK:
        session.users -= 1
        if session.users > 0 or _SESSION is not session:
            return
        _SESSION = None
        _spans.install(None, False)
    session.close()
