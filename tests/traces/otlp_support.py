"""OTLP/JSON files made by the real opentelemetry-sdk: GenAI spans exported, then written with the
proto's JSON mapping (``google.protobuf.json_format``), one ``ExportTraceServiceRequest`` a line,
as the collector's file exporter writes them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def write_otlp(path: Path, record: Callable[[Tracer], None]) -> Path:
    """Run ``record`` with a tracer of a fresh provider; write what it exported to ``path``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "recorded-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record(provider.get_tracer("agent"))
    provider.shutdown()
    request = encode_spans(exporter.get_finished_spans())
    line = json.dumps(json.loads(MessageToJson(request)), separators=(",", ":"))
    path.write_text(line + "\n")
    return path


def chat_span(
    tracer: Tracer, prompt: list[dict], completion: str, *, input_tokens: int = 10, output_tokens: int = 3, **extra
) -> None:
    """One model call in the 1.26 conventions: ``gen_ai.content.prompt``/``completion`` events."""
    with tracer.start_as_current_span("chat scripted") as span:
        span.set_attribute("gen_ai.system", "openai")
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-test")
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
        for key, value in extra.items():
            span.set_attribute(key, value)
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(prompt)})
        span.add_event(
            "gen_ai.content.completion",
            {"gen_ai.completion": json.dumps([{"role": "assistant", "content": completion}])},
        )
