"""How values are written into the store: JSON, compressed transcripts, and the search text.

Transcripts are JSON compressed with raw DEFLATE primed with a preset dictionary
of the JSON the engine writes (message, tool-call and turn keys): a rollout's
messages and turns are a few hundred bytes each, too small for DEFLATE to find
repeats in on its own, and the dictionary brings them to a quarter of their
size. A stored value is ``bytes`` starting with a codec byte (``\\x01``: this
dictionary); version-1 files hold plain JSON text, which :func:`decode` reads
as is. The dictionary is part of the file format: never change it, add a codec.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

import orjson

from benchmax.envs import content_text

_ZLIB_DICT_1 = (
    b'{"temperature":null,"top_p":null,"max_tokens":null,"seed":null,"stop":null,"logprobs":false,'
    b'"extra_body":{}}{"temperature":1.0,"top_p":1.0,"max_tokens":'
    b',"prompt_token_ids":[,"completion_token_ids":[,"completion_logprobs":[-0.'
    b'{"index":1,"started_at":17,"model_seconds":0.,"tool_seconds":0.0,"finish_reason":"length",'
    b'"usage":{"prompt_tokens":,"completion_tokens":},"tool_calls":0,"prompt_token_ids":null,'
    b'"completion_token_ids":null,"completion_logprobs":null}'
    b'[{"index":0,"started_at":17,"model_seconds":0.,"tool_seconds":0.0,"finish_reason":"stop",'
    b'"usage":{"prompt_tokens":,"completion_tokens":},"tool_calls":1,"prompt_token_ids":null,'
    b'"completion_token_ids":null,"completion_logprobs":null},'
    b'{"index":1,"started_at":17,"model_seconds":0.,"tool_seconds":0.0,"finish_reason":"tool_calls",'
    b'"usage":{"prompt_tokens":,"completion_tokens":},"tool_calls":1,"prompt_token_ids":null,'
    b'"completion_token_ids":null,"completion_logprobs":null}]'
    b'[{"role":"system","content":"You are a helpful assistant."},'
    b'{"role":"user","content":[{"type":"text","text":"'
    b'{"role":"assistant","content":null,"reasoning_content":"'
    b'{"role":"tool","tool_call_id":"call_0","name":"","content":"error: '
    b'{"role":"assistant","content":"","tool_calls":[{"id":"call_0","type":"function",'
    b'"function":{"name":"","arguments":"{\\"query\\": \\"'
    b'[{"role":"user","content":"What is the answer? Use the tool."},'
    b'{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",'
    b'"function":{"name":"add","arguments":"{\\"a\\": 1, \\"b\\": 2}"}}]},'
    b'{"role":"tool","tool_call_id":"call_1","name":"add","content":"'
    b'"},{"role":"assistant","content":"'
)
_CODEC_ZLIB_1 = 1
_ZLIB_1 = bytes((_CODEC_ZLIB_1,))

SEARCH_TEXT_CHARS = 100_000
"""The most transcript text one rollout puts in the search index (longer is cut)."""


def dumps(value: Any) -> str:
    """JSON text of what an env, a model or a trainer handed over, never failing on it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
    except orjson.JSONEncodeError:
        # Env output with lone surrogates or nested past orjson's limit: store what can be kept.
        return orjson.dumps(scrub(value), option=orjson.OPT_NON_STR_KEYS, default=repr).decode()


def scrub(value: Any, depth: int = 0) -> Any:
    """``value`` with strings made valid UTF-8 and nesting cut at 200 levels (the cut is marked)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if depth >= 200:
        return "…[nested too deep to store]"
    if isinstance(value, Mapping):
        return {scrub(str(key)): scrub(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item, depth + 1) for item in value]
    if is_dataclass(value) and not isinstance(value, type):
        return scrub(asdict(value), depth + 1)
    if value is None or isinstance(value, bool | int | float):
        return value
    try:
        return scrub(str(value))
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def pack(value: Any) -> bytes:
    """``value`` as stored in ``transcripts``: JSON, compressed with the preset dictionary."""
    return pack_json(dumps(value).encode())


def pack_json(text: bytes) -> bytes:
    # The window only has to reach back over the text, the dictionary and zlib's lookahead
    # (262 bytes). The full 32 KB one costs ten times the compression of a typical transcript
    # (a few hundred bytes) just to set up; a window that fits gives the same bytes
    # (tests/store/test_store_codec.py), and any raw DEFLATE reader (``-15``) reads them.
    window = min(max((len(text) + len(_ZLIB_DICT_1) + 262).bit_length(), 9), 15)
    packer = zlib.compressobj(6, zlib.DEFLATED, -window, 8, zlib.Z_DEFAULT_STRATEGY, _ZLIB_DICT_1)
    return _ZLIB_1 + packer.compress(text) + packer.flush()


@functools.lru_cache(maxsize=64)
def unpack_repeated(value: bytes) -> bytes | None:
    """:func:`unpack_json` for values most rollouts share (a run's sampling parameters)."""
    return unpack_json(value)


def unpack_json(value: bytes | str | None) -> bytes | None:
    """The JSON text of a stored transcript value (version 1 stored it uncompressed)."""
    if value.__class__ is bytes and value[:1] == _ZLIB_1:
        # a complete raw DEFLATE stream: decompress() returns all of it, no flush() needed
        return zlib.decompressobj(-15, _ZLIB_DICT_1).decompress(value[1:])
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    raise ValueError(f"unknown transcript codec {value[:1]!r} in the run store; upgrade benchmax to read it")


def unpack_many(values: Sequence[bytes | str | None]) -> list[bytes]:
    """:func:`unpack_json` of each stored transcript value, ``b"[]"`` for an empty one (an export's hot loop)."""
    start = _ZLIB_1
    inflater = zlib.decompressobj
    return [
        (inflater(-15, _ZLIB_DICT_1).decompress(value[1:]) or b"[]")
        if value.__class__ is bytes and value[:1] == start
        else unpack_json(value) or b"[]"
        for value in values
    ]


def decode(value: bytes | str | None) -> Any:
    """A stored transcript value as Python data (``None`` stays ``None``)."""
    text = unpack_json(value)
    return None if text is None else orjson.loads(text)


def search_text(messages: Sequence[Any]) -> str:
    """Everything of a transcript a search should find: message text, reasoning, tool calls."""
    parts: list[str] = []
    size = 0
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        for text in _message_texts(message):
            if text:
                parts.append(text)
                size += len(text) + 1
        if size >= SEARCH_TEXT_CHARS:
            break
    return "\n".join(parts)[:SEARCH_TEXT_CHARS]


def _message_texts(message: Mapping[str, Any]) -> list[str]:
    texts = [content_text(message.get("content"))]
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        texts.append(reasoning)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            texts.append(str(function.get("name") or ""))
            arguments = function.get("arguments")
            texts.append(arguments if isinstance(arguments, str) else dumps(arguments))
    name = message.get("name")
    if isinstance(name, str):
        texts.append(name)
    return texts
