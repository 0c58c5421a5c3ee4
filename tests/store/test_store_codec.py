"""Stored transcripts: compressed with the preset dictionary, read back exactly."""

from __future__ import annotations

import random
import zlib

import pytest

from benchmax.store import _codec


def _full_window(text: bytes) -> bytes:
    """What the codec wrote before it sized the window: DEFLATE's full 32 KB one."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, _codec._ZLIB_DICT_1)
    return bytes((_codec._CODEC_ZLIB_1,)) + packer.compress(text) + packer.flush()


def _texts() -> list[bytes]:
    rng = random.Random(7)
    texts = [b"", b"[]", _codec._ZLIB_DICT_1, _codec._ZLIB_DICT_1 * 40]
    for size in (1, 100, 500, 1_000, 1_700, 2_000, 3_800, 4_000, 8_000, 16_000, 31_000, 33_000, 100_000):
        texts.append(bytes(rng.getrandbits(8) for _ in range(size)))  # incompressible
        texts.append((_codec._ZLIB_DICT_1 * (size // 1_000 + 1))[:size])  # matches at every distance
        texts.append("".join(rng.choice(' "role":content,{}ab') for _ in range(size)).encode())
    return texts


@pytest.mark.parametrize("text", _texts(), ids=lambda text: f"{len(text)}B")
def test_a_window_sized_to_the_text_writes_the_same_bytes_as_the_full_window(text: bytes) -> None:
    assert _codec.pack_json(text) == _full_window(text)


def test_a_packed_transcript_reads_back_as_it_was_written() -> None:
    messages = [
        {"role": "user", "content": "What is 2 + 3? Use the tool."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                             "function": {"name": "add", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "add", "content": "5 " * 20_000},
    ]
    packed = _codec.pack(messages)
    assert packed[:1] == b"\x01"
    assert _codec.decode(packed) == messages
    assert _codec.unpack_many([packed, None, "[1]"]) == [_codec.unpack_json(packed), b"[]", b"[1]"]
