"""Recorded model traffic read into benchmax: chat logs (JSONL) and OTLP GenAI traces.

``benchmax import`` turns what these readers return into a run, so an env's
reward can be developed and rescored on traffic recorded elsewhere. The readers
only read: every input is untrusted and bounded here
(:data:`MAX_LINE_BYTES`, :data:`MAX_MESSAGES`, :data:`MAX_CONTENT_CHARS`), and a
malformed line is a :class:`TraceFormatError` naming ``FILE:LINE`` and the field.
"""

from pathlib import Path

from benchmax.traces._chat import parse_chat_record, read_chat_jsonl
from benchmax.traces._otlp import looks_like_otlp, read_otlp_json
from benchmax.traces._records import (
    MAX_CONTENT_CHARS,
    MAX_LINE_BYTES,
    MAX_MESSAGES,
    ImportedConversation,
    SkippedLine,
    TraceFormatError,
    TraceRead,
)


def read_traces(path: str | Path, *, skip_bad: bool = False) -> TraceRead:
    """A chat-log JSONL file or an OTLP/JSON export, told apart by its first bytes."""
    if looks_like_otlp(path):
        return read_otlp_json(path, skip_bad=skip_bad)
    return read_chat_jsonl(path, skip_bad=skip_bad)


__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_LINE_BYTES",
    "MAX_MESSAGES",
    "ImportedConversation",
    "SkippedLine",
    "TraceFormatError",
    "TraceRead",
    "looks_like_otlp",
    "parse_chat_record",
    "read_chat_jsonl",
    "read_otlp_json",
    "read_traces",
]
