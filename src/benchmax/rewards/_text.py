"""Reading the model's answer out of a transcript."""

from __future__ import annotations

import re
from collections.abc import Sequence

from benchmax.envs import completion_text

extract_completion_text = completion_text
"""The final assistant answer, stripped (0.2.x's name for :func:`benchmax.envs.completion_text`)."""


_TAG_CACHE: dict[str, re.Pattern[str]] = {}
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_tag(text: str, tag: str = "answer") -> str | None:
    """The stripped body of the last ``<tag>…</tag>`` block, or ``None`` if there is none.

    The last block wins because models often restate the format early
    ("I will put my answer in <answer></answer>") before answering.
    """
    pattern = _TAG_CACHE.get(tag)
    if pattern is None:
        name = re.escape(tag)
        pattern = re.compile(rf"<{name}(?:\s[^>]*)?>(.*?)</{name}\s*>", re.DOTALL | re.IGNORECASE)
        _TAG_CACHE[tag] = pattern
    matches = pattern.findall(text)
    return matches[-1].strip() if matches else None


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{…}`` (or ``\fbox{…}``), nested braces kept whole.

    A regex cannot balance braces, so this scans: ``\boxed{\frac{1}{2}}`` gives
    ``\frac{1}{2}``. An unclosed box is ignored.
    """
    found = None
    for match in _BOXED.finditer(text):
        depth = 1
        index = match.end()
        while index < len(text) and depth:
            char = text[index]
            if char == "\\" and index + 1 < len(text):
                index += 2
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            index += 1
        if depth == 0:
            found = text[match.end() : index - 1].strip()
    return found


def last_line(text: str) -> str:
    """The last non-blank line, stripped; ``""`` for blank text."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def extract_answer(text: str, *, order: Sequence[str] = ("tag", "boxed", "last_line"), tag: str = "answer") -> str:
    r"""The answer by the first strategy in ``order`` that finds one; ``""`` when none does.

    Strategies: ``"tag"`` (``<answer>…</answer>``), ``"boxed"`` (``\boxed{}``)
    and ``"last_line"``. Leave ``"last_line"`` out to insist on explicit answers.
    """
    for strategy in order:
        if strategy == "tag":
            found = extract_tag(text, tag)
        elif strategy == "boxed":
            found = extract_boxed(text)
        elif strategy == "last_line":
            found = last_line(text) or None
        else:
            raise ValueError(f"unknown answer strategy {strategy!r}; use 'tag', 'boxed' or 'last_line'")
        if found is not None:
            return found
    return ""


def extract_code_block(text: str, language: str | None = "python") -> str | None:
    """The last fenced code block (```` ```python ````), or ``None``.

    With ``language`` set, blocks tagged with another language are skipped but
    untagged blocks still count, since models often omit the tag.
    """
    found = None
    for match in _FENCE.finditer(text):
        tag = match.group(1).lower()
        if language is None or not tag or tag in {language.lower(), _ALIASES.get(language.lower())}:
            found = match.group(2)
    return found


_ALIASES = {"python": "py", "javascript": "js", "typescript": "ts"}
