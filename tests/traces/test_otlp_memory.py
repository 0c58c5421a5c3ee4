"""An OTLP/JSON file is streamed, never held: a line, or a span, at a time, and of each trace only what
its conversation needs. Memory stays below the file's size in both layouts an export takes."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from otlp_support import chat_span, write_otlp

from benchmax.traces import TraceFormatError, read_otlp_json

MiB = 1024 * 1024
CALLS = 6


def _attribute(key: str, value: str | int) -> dict[str, Any]:
    return {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}


def _trace(number: int) -> list[dict[str, Any]]:
    """An agent's trace: ``CALLS`` model calls, each resending the history, each beside a tool span."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"task {number}: " + "q" * 300}]
    spans = []
    for call in range(CALLS):
        answer = {"role": "assistant", "content": f"step {call} " + "a" * 300}
        common = {"traceId": f"{number:032x}", "startTimeUnixNano": str(10_000 + call * 10)}
        spans.append(
            {
                **common,
                "spanId": f"{number * 100 + call:016x}",
                "endTimeUnixNano": str(10_005 + call * 10),
                "attributes": [
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.request.model", "m"),
                    _attribute("gen_ai.usage.input_tokens", 10),
                    _attribute("gen_ai.prompt", json.dumps(history)),
                    _attribute("gen_ai.completion", json.dumps([answer])),
                    *(_attribute(f"http.detail.{index}", f"value-{index}") for index in range(20)),
                ],
            }
        )
        spans.append({**common, "spanId": f"{number * 100 + 50 + call:016x}", "attributes": [_attribute("tool", "x")]})
        history = [*history, answer, {"role": "user", "content": "go on"}]
    return spans


def _request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    resource = {"attributes": [_attribute("service.name", "agent")]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def _export(folder: Path, traces: int) -> tuple[Path, Path]:
    """The same traces as JSON lines (one request per trace) and as one document over many lines."""
    per_trace = [_trace(number) for number in range(traces)]
    lines = folder / "traces.jsonl"
    lines.write_text("".join(json.dumps(_request(spans)) + "\n" for spans in per_trace))
    document = folder / "traces.json"
    document.write_text(json.dumps(_request([span for spans in per_trace for span in spans]), indent=0))
    return lines, document


@pytest.mark.parametrize("layout", ["jsonl", "document"])
def test_reading_a_file_takes_a_fraction_of_its_size_in_memory(tmp_path, layout):
    lines, document = _export(tmp_path, traces=300)
    path = lines if layout == "jsonl" else document
    size = path.stat().st_size
    assert size > 6 * MiB

    tracemalloc.start()
    try:
        read = read_otlp_json(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert len(read.conversations) == 300
    # The conversations read are a third of the file here (each trace's last call, its history
    # whole); parsing the file whole took 13 to 17 times the file.
    assert peak < size, f"{peak / MiB:.1f} MiB to read {size / MiB:.1f} MiB"


def test_both_layouts_read_as_the_same_conversations(tmp_path):
    lines, document = _export(tmp_path, traces=3)

    from_lines, from_document = read_otlp_json(lines), read_otlp_json(document)

    assert len(from_lines.conversations) == 3
    for one, other in zip(from_lines.conversations, from_document.conversations, strict=True):
        assert one.messages == other.messages and len(one.messages) == 2 * CALLS
        assert one.messages[-1]["content"].startswith(f"step {CALLS - 1} ")
        assert (one.input_tokens, one.conversation_id) == (other.input_tokens, other.conversation_id)
        assert one.input_tokens == 10 * CALLS


def test_a_document_from_the_sdk_pretty_printed_reads_as_its_one_line_form(tmp_path):
    prompt = [{"role": "user", "content": "2+3?"}]

    def record(tracer):
        with tracer.start_as_current_span("agent run") as root:
            root.set_attribute("benchmax.example_id", "ex-7")
            chat_span(tracer, prompt, "5", input_tokens=20, output_tokens=2)

    line = write_otlp(tmp_path / "line.json", record)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(line.read_text()), indent=2))

    (conversation,) = read_otlp_json(pretty).conversations
    (expected,) = read_otlp_json(line).conversations
    assert dataclasses.replace(conversation, source=expected.source) == expected
    assert conversation.example_id == "ex-7" and conversation.source.startswith(f"{pretty} trace ")


def test_a_broken_span_in_a_document_is_named_and_the_document_skipped_only_when_asked(tmp_path):
    spans = _trace(0)
    spans[3]["attributes"] = {"not": "a list"}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_request(spans), indent=1))

    with pytest.raises(TraceFormatError, match=r"t\.json:1: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[3\]"):
        read_otlp_json(path)
    read = read_otlp_json(path, skip_bad=True)
    assert read.conversations == () and [item.where for item in read.skipped] == [f"{path}:1"]
