"""How an example reads in one line, wherever a list of examples shows one.

The CLI summary, ``benchmax diff``, the inspector's tables and the static export
all show an example by the same *prompt excerpt*: the text of its last prompt
message on one line (whitespace collapsed, control characters dropped), cut to a
bound, with image parts as placeholders (``[image 640x480 png]``) instead of
their base64. Model and dataset text is untrusted: the excerpt is plain text,
and each face escapes it for its medium (Rich markup off, DOM text nodes).
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from benchmax.envs import content_text
from benchmax.store._batch import SQL_PARAMETERS, chunks

EXCERPT_CHARS = 160
"""The longest prompt excerpt, in characters (an ellipsis marks a cut)."""

MAX_IMAGE_URI_CHARS = 2_000_000
"""The longest ``data:`` image a page renders inline; longer ones are shown as a placeholder."""

_HEADER_CHARS = 96_000
"""Base64 characters decoded to read an image's size (a JPEG's size may follow its EXIF block)."""

_DATA_URI = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*),", re.ASCII)
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def one_line(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, without control characters, at most ``limit`` characters (``…`` marks a cut)."""
    cleaned = "".join(" " if _is_control(ch) else ch for ch in text)
    line = " ".join(cleaned.split())
    return line if len(line) <= limit else line[: max(0, limit - 1)].rstrip() + "…"


def _is_control(ch: str) -> bool:
    return ch in _BIDI or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r")


def content_line(content: Any, limit: int = EXCERPT_CHARS) -> str:
    """Message content (a string or content parts) as one line, images as placeholders."""
    if isinstance(content, list | tuple):
        pieces = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") not in (None, "text"):
                pieces.append(part_label(part))
            else:
                pieces.append(content_text([part]))
        return one_line(" ".join(piece for piece in pieces if piece), limit)
    return one_line(content_text(content), limit)


def prompt_excerpt(payload: Any, limit: int = EXCERPT_CHARS) -> str:
    """An example payload's last prompt message as one line (``""`` when it has none)."""
    messages = payload.get("prompt_messages") if isinstance(payload, Mapping) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], Mapping):
        return ""
    return content_line(messages[-1].get("content"), limit)


def prompt_excerpts(
    conn: sqlite3.Connection, example_ids: Iterable[str], limit: int = EXCERPT_CHARS
) -> dict[str, str]:
    """``{example_id: prompt excerpt}`` for the given examples (those the run does not hold are left out)."""
    wanted = list(dict.fromkeys(example_ids))
    result: dict[str, str] = {}
    for chunk in chunks(wanted, SQL_PARAMETERS):
        marks = ",".join("?" * len(chunk))
        for example_id, payload in conn.execute(
            f"SELECT example_id, payload FROM examples WHERE example_id IN ({marks})", chunk
        ).fetchall():
            try:
                result[example_id] = prompt_excerpt(orjson.loads(payload), limit)
            except orjson.JSONDecodeError:
                result[example_id] = one_line(str(payload), limit)
    return result


def example_fields(payload: Any) -> dict[str, Any]:
    """The payload fields a reward reads (``rollout.example_args``): all but ``prompt_messages``."""
    if not isinstance(payload, Mapping):
        return {}
    return {str(key): value for key, value in payload.items() if key != "prompt_messages"}


def part_label(part: Mapping[str, Any]) -> str:
    """A non-text content part as a short placeholder: ``[image 640x480 png]``, ``[image https://…]``."""
    kind = str(part.get("type"))
    if kind != "image_url":
        return f"[{one_line(kind, 40)}]"
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str) or not url:
        return "[image]"
    if _DATA_URI.match(url) is None:
        return f"[image {one_line(url, 60)}]"
    return f"[image {describe_data_image(url)}]"


def describe_data_image(url: str) -> str:
    """A ``data:`` image in a few words: its size when readable and its format (``640x480 png``);
    one over :data:`MAX_IMAGE_URI_CHARS` is only measured (``png, 3.1 MB: too big to show``)."""
    found = _DATA_URI.match(url)
    if found is None:
        return "not a data URI"
    mime = (found.group("mime") or "").lower()
    fmt = mime.split("/", 1)[1].split("+", 1)[0] if mime.startswith("image/") else (mime or "data")
    if len(url) > MAX_IMAGE_URI_CHARS:
        return f"{fmt}, {_size(len(url))}: too big to show"
    size = _dimensions(url[found.end() :]) if ";base64" in found.group("params").lower() else None
    return f"{size[0]}x{size[1]} {fmt}" if size else fmt


def _dimensions(data: str) -> tuple[int, int] | None:
    """Width and height from the image's header (Pillow, when installed, reads only the header)."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        return None
    head = re.sub(r"\s+", "", data[:_HEADER_CHARS])
    head = head[: len(head) - len(head) % 4]
    try:
        raw = base64.b64decode(head, validate=True)
        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
    return (width, height) if width > 0 and height > 0 else None


def _size(chars: int) -> str:
    return f"{chars / 1e6:.1f} MB" if chars >= 1e6 else f"{max(1, round(chars / 1e3))} kB"
