"""Solid-colour PNGs as data URLs, in pure Python so both interpreters make the same bytes."""

import base64
import struct
import zlib

COLORS = {"red": (220, 20, 30), "green": (20, 200, 40), "blue": (30, 40, 220), "yellow": (240, 230, 20)}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def solid_png(rgb: tuple[int, int, int], size: int = 4) -> bytes:
    row = b"\x00" + bytes(rgb) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * size, 9))
        + _chunk(b"IEND", b"")
    )


def data_url(color: str, size: int = 4) -> str:
    return "data:image/png;base64," + base64.b64encode(solid_png(COLORS[color], size)).decode()
