"""Shaping terms: penalties for answers that run long or ignore the required format.

Penalties are zero or negative so they add onto a correctness reward; return
them as their own components (``{"correct": 1.0, "too_long": -0.25}``) so each
shows up separately in the run's reward breakdown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from benchmax.rewards._text import extract_boxed

LengthUnit = Literal["chars", "words"]


def length_penalty(
    text_or_length: str | int,
    limit: int,
    *,
    unit: LengthUnit = "chars",
    ramp: float = 1.0,
    scale: float = 1.0,
) -> float:
    """0.0 up to ``limit``, then falling linearly to ``-scale`` at ``limit * (1 + ramp)``.

    Pass text (measured in ``unit``) or a length you already have, such as the
    completion tokens from ``rollout.usage``. ``ramp=0`` makes it a hard
    cliff: any excess costs the full ``scale``.
    """
    if limit <= 0:
        raise ValueError(f"limit must be positive, got {limit!r}")
    if isinstance(text_or_length, str):
        length = len(text_or_length.split()) if unit == "words" else len(text_or_length)
    else:
        length = int(text_or_length)
    excess = length - limit
    if excess <= 0:
        return 0.0
    if ramp <= 0:
        return -scale
    return -scale * min(1.0, excess / (limit * ramp))


def tags_in_order(text: str, tags: Sequence[str] = ("think", "answer"), *, strict: bool = False) -> bool:
    """Whether each ``<tag>…</tag>`` appears exactly once, closed, in the given order.

    ``strict`` also forbids text outside the blocks (whitespace aside), the
    usual "<think>…</think><answer>…</answer>" format check.
    """
    position = 0
    pieces = []
    for tag in tags:
        name = re.escape(tag)
        opens = re.findall(rf"<{name}(?:\s[^>]*)?>", text, re.IGNORECASE)
        closes = re.findall(rf"</{name}\s*>", text, re.IGNORECASE)
        if len(opens) != 1 or len(closes) != 1:
            return False
        match = re.compile(rf"<{name}(?:\s[^>]*)?>.*?</{name}\s*>", re.DOTALL | re.IGNORECASE).search(text, position)
        if match is None:
            return False
        pieces.append(text[position : match.start()])
        position = match.end()
    pieces.append(text[position:])
    return not strict or all(not piece.strip() for piece in pieces)


def format_penalty(
    text: str,
    *,
    tags: Sequence[str] = ("answer",),
    strict: bool = False,
    boxed: bool = False,
    pattern: str | re.Pattern[str] | None = None,
    penalty: float = 1.0,
) -> float:
    r"""``-penalty`` when ``text`` breaks the required format, else 0.0.

    The format is: ``tags`` present once each and in order (see
    :func:`tags_in_order`), a ``\boxed{}`` answer when ``boxed``, and a
    ``pattern`` search hit when one is given. All given checks must pass.
    """
    ok = True
    if tags:
        ok = tags_in_order(text, tags, strict=strict)
    if ok and boxed:
        ok = extract_boxed(text) is not None
    if ok and pattern is not None:
        ok = re.search(pattern, text) is not None
    return 0.0 if ok else -abs(penalty)
