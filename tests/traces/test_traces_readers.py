"""The readers: chat-log JSONL shapes, OTLP/JSON from the real SDK, and bad input named by file:line:field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from otlp_support import chat_span, write_otlp

from benchmax.traces import (
    MAX_CONTENT_CHARS,
    TraceFormatError,
    read_chat_jsonl,
    read_otlp_json,
    read_traces,
)

PROMPT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+3?"}]


def _jsonl(path: Path, *records: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_both_chat_shapes_are_read_with_their_ids_tools_and_usage(tmp_path):
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    path = _jsonl(
        tmp_path / "log.jsonl",
        {
            "id": "c1",
            "example_id": "ex-1",
            "messages": [*PROMPT, {"role": "assistant", "content": "5"}],
            "tools": [tool],
        },
        "",
        {
            "request": {"model": "m", "messages": PROMPT, "metadata": {"example_id": "ex-2"}},
            "response": {
                "id": "chatcmpl-9",
                "model": "m-2024",
                "created": 1700000000,
                "choices": [{"message": {"role": "assistant", "content": "five"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 4},
            },
        },
    )

    read = read_chat_jsonl(path)

    first, second = read.conversations
    assert (first.source, first.conversation_id, first.example_id) == (f"{path}:1", "c1", "ex-1")
    assert first.prompt == PROMPT and first.prompt_count == 2 and first.tools == (tool,)
    assert second.source == f"{path}:3"
    assert second.messages[-1] == {"role": "assistant", "content": "five"}
    assert (second.example_id, second.model, second.finish_reason) == ("ex-2", "m-2024", "length")
    assert (second.input_tokens, second.output_tokens, second.started_at) == (12, 4, 1700000000.0)
    assert read.skipped == ()


BAD_LINES = [
    ("{not json", "not valid JSON"),
    ('["a list"]', "a line must be a JSON object, got list"),
    ({"text": "no messages"}, "a line needs 'messages'"),
    ({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role: 'bot' is not a chat role"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content: must be a string"),
    ({"messages": PROMPT}, "messages: no assistant turn"),
    (
        {"messages": [*PROMPT, {"role": "assistant", "content": "x"}], "example_id": ""},
        "example_id: must be a non-empty",
    ),
    ({"request": {"messages": PROMPT}, "response": {"choices": []}}, "response.choices must be a non-empty list"),
    (
        {"messages": [*PROMPT, {"role": "assistant", "content": "x"}], "usage": {"prompt_tokens": -1}},
        "usage.prompt_tokens must be a token count",
    ),
]


@pytest.mark.parametrize(("line", "says"), BAD_LINES)
def test_a_malformed_line_is_refused_naming_file_line_and_field(tmp_path, line, says):
    good = {"messages": [*PROMPT, {"role": "assistant", "content": "5"}]}
    path = _jsonl(tmp_path / "log.jsonl", good, line)

    with pytest.raises(TraceFormatError) as raised:
        read_chat_jsonl(path)
    assert str(raised.value).startswith(f"{path}:2: ")
    assert says in str(raised.value)

    read = read_chat_jsonl(path, skip_bad=True)
    assert len(read.conversations) == 1
    assert [item.where for item in read.skipped] == [f"{path}:2"]


def test_model_output_is_bounded(tmp_path):
    huge = "x" * (MAX_CONTENT_CHARS + 10)
    path = _jsonl(tmp_path / "log.jsonl", {"messages": [*PROMPT, {"role": "assistant", "content": huge}]})

    message = read_chat_jsonl(path).conversations[0].messages[-1]

    assert len(message["content"]) < MAX_CONTENT_CHARS + 40
    assert message["content"].endswith("…[truncated 10 chars]")


def test_otlp_spans_from_the_sdk_become_one_conversation_per_trace(tmp_path):
    def record(tracer):
        with tracer.start_as_current_span("agent run") as root:
            root.set_attribute("benchmax.example_id", "ex-7")
            chat_span(tracer, PROMPT, "5", input_tokens=20, output_tokens=2)
            follow_up = [*PROMPT, {"role": "assistant", "content": "5"}, {"role": "user", "content": "sure?"}]
            chat_span(tracer, follow_up, "yes, 5", input_tokens=30, output_tokens=3)
        with tracer.start_as_current_span("other agent run"):
            chat_span(tracer, [{"role": "user", "content": "hi"}], "hello")
        with tracer.start_as_current_span("no model calls"):
            pass

    path = write_otlp(tmp_path / "traces.json", record)
    assert '"resourceSpans"' in path.read_text()

    read = read_traces(path)

    first, second = read.conversations
    assert first.example_id == "ex-7" and second.example_id is None
    assert [m["content"] for m in first.messages] == ["be brief", "2+3?", "5", "sure?", "yes, 5"]
    assert first.prompt_count == 2
    assert (first.input_tokens, first.output_tokens) == (50, 5), "usage is summed over the trace's calls"
    assert (first.model, first.system, first.finish_reason) == ("gpt-test", "openai", "stop")
    assert first.started_at and first.ended_at and first.started_at <= first.ended_at
    assert second.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert first.source.startswith(f"{path} trace ")


def test_otlp_input_and_output_messages_in_parts_form_with_a_tool_round(tmp_path):
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "add 2 and 3"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": 5}]},
    ]
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": "5"}], "finish_reason": "stop"}]

    def record(tracer):
        with tracer.start_as_current_span("chat m") as span:
            span.set_attribute("gen_ai.provider.name", "openai")
            span.set_attribute("gen_ai.request.model", "m")
            span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
            span.set_attribute("gen_ai.output.messages", json.dumps(outputs))

    (conversation,) = read_otlp_json(write_otlp(tmp_path / "t.json", record)).conversations

    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    assert conversation.messages[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a":2,"b":3}'}
    assert conversation.messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert conversation.prompt_count == 1 and conversation.finish_reason == "stop"


def test_a_broken_otlp_attribute_is_named_and_skipped_only_when_asked(tmp_path):
    def record(tracer):
        with tracer.start_as_current_span("chat m") as span:
            span.set_attribute("gen_ai.system", "openai")
            span.set_attribute("gen_ai.input.messages", "[{not json")
        chat_span(tracer, PROMPT, "5")

    path = write_otlp(tmp_path / "t.json", record)

    with pytest.raises(TraceFormatError, match=r"t\.json:1: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]"):
        read_otlp_json(path)
    read = read_otlp_json(path, skip_bad=True)
    assert len(read.conversations) == 1 and len(read.skipped) == 1
    assert "gen_ai.input.messages: not valid JSON" in read.skipped[0].reason
