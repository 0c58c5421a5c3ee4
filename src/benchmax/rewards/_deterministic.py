"""Judge-free reward helpers for retrieval and tool-use envs (benchmax 0.2's set).

Each takes a ``Completion``: the answer text itself, or a transcript whose
final assistant message is the answer (see ``extract_completion_text``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any, Literal, TypeAlias

from benchmax.rewards._text import extract_completion_text

Completion: TypeAlias = str | Sequence[Mapping[str, Any]]

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_BLOCK = re.compile(r"<answer\s*>(.*?)</answer\s*>", re.IGNORECASE | re.DOTALL)
_ANSWER_OPEN = re.compile(r"<answer\s*>", re.IGNORECASE)
_CITATION = re.compile(r"\[Source:\s*([^\]]+)\]", re.IGNORECASE)
_TOOL_CALL_MARK = "<tool_call>"


AnswerMode: TypeAlias = Literal["lenient", "strict"]
"""How :func:`answer_block` reads a reply: ``"lenient"`` scores an untagged reply as a whole
(``benchmax.rewards.extract_answer_block``), ``"strict"`` means no tag, no answer
(``benchmax.rag.extract_answer_block``), so reasoning is never scored as an answer."""


def answer_block(text: str, *, mode: AnswerMode) -> str:
    """The answer inside ``<answer>…</answer>``, stripped, read as ``mode`` says.

    ``"lenient"``: the first closed block; with none, the whole text.
    ``"strict"``: the last closed block (the committed answer); with none, what
    follows the last opening tag (a reply cut off mid-answer); with no tag, ``""``.
    The two modes are the two 0.2.x functions of the same name, kept apart by an
    explicit argument rather than by which module one imported.
    """
    text = text or ""
    if mode == "lenient":
        match = _ANSWER.search(text)
        return (match.group(1) if match else text).strip()
    if mode == "strict":
        blocks = _ANSWER_BLOCK.findall(text)
        if blocks:
            return blocks[-1].strip()
        opens = list(_ANSWER_OPEN.finditer(text))
        return text[opens[-1].end() :].strip() if opens else ""
    raise ValueError(f"answer_block mode must be 'lenient' or 'strict', got {mode!r}")


def extract_answer_block(text: str) -> str:
    """0.2.x's lenient reading: ``answer_block(text, mode="lenient")``."""
    return answer_block(text, mode="lenient")


def clip01(value: Any) -> float:
    """``value`` as a float in ``[0, 1]``; anything non-numeric or non-finite is ``0.0``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(number):
        return 0.0
    return min(1.0, max(0.0, number))


def percent_of_text_a_in_text_b(text_a: str, text_b: str) -> float:
    """The share of ``text_a``'s characters that ``text_b`` reproduces, in matching runs.

    Uses :class:`difflib.SequenceMatcher` (default junk heuristic), so order
    matters: a paraphrase scores low, a verbatim quote high.
    """
    if not text_a:
        return 0.0
    blocks = SequenceMatcher(None, text_a, text_b).get_matching_blocks()
    return sum(block.size for block in blocks) / len(text_a)


def overlap_reward(
    completion: Completion,
    ground_truth: Any,
    *,
    reference_chunks: Sequence[Mapping[str, Any]] = (),
    minimum_overlap: float = 0.25,
) -> float:
    """How much of the reference the answer reproduces; ``0.0`` below ``minimum_overlap``.

    The reference is the chunks' ``content`` joined by spaces when chunks are
    given, else ``ground_truth`` as text.
    """
    if not 0 <= minimum_overlap <= 1:
        raise ValueError(f"minimum_overlap must be within [0, 1], got {minimum_overlap!r}")
    if reference_chunks:
        reference = " ".join(str(chunk.get("content", "")) for chunk in reference_chunks)
    else:
        reference = str(ground_truth or "")
    if not reference:
        return 0.0
    share = percent_of_text_a_in_text_b(reference, extract_completion_text(completion))
    return share if share >= minimum_overlap else 0.0


def count_search_calls(completion: Completion) -> int:
    """How many ``<tool_call>`` markers the assistant wrote as text (chat-template style calls).

    Structured ``tool_calls`` are not counted; see ``benchmax.rewards.tool_calls`` for those.
    """
    if isinstance(completion, str):
        return completion.count(_TOOL_CALL_MARK)
    total = 0
    for message in completion:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str):
            total += content.count(_TOOL_CALL_MARK)
    return total


def search_within_budget(calls: int, max_calls: int) -> bool:
    """Whether ``calls`` stays within ``max_calls``; negative counts are a caller bug."""
    if calls < 0 or max_calls < 0:
        raise ValueError(f"calls and max_calls must be non-negative, got {calls} and {max_calls}")
    return calls <= max_calls


def citation_score(
    completion: Completion,
    reference_chunks: Sequence[Mapping[str, Any]],
    *,
    source_field: str | Sequence[str] = "source_id",
    canonicalize: Callable[[str], str] | None = None,
) -> dict[str, float]:
    """Precision and recall of the answer's ``[Source: id]`` citations against the gold chunks.

    A chunk's id is the first of ``source_field`` that its ``metadata`` holds
    non-blank; ids on both sides pass through ``canonicalize`` (default: strip).
    No citations or no gold ids gives ``{"precision": 0.0, "recall": 0.0}``.
    """
    fields = (source_field,) if isinstance(source_field, str) else tuple(source_field)
    if not fields:
        raise ValueError("source_field must name at least one metadata field")
    normalize = canonicalize or str.strip
    cited = {normalize(found) for found in _CITATION.findall(extract_completion_text(completion))} - {""}
    gold: set[str] = set()
    for chunk in reference_chunks:
        metadata = chunk.get("metadata")
        if not isinstance(metadata, Mapping):
            continue
        for name in fields:
            value = metadata.get(name)
            if value is None or not str(value).strip():
                continue
            normalized = normalize(str(value))
            if normalized:
                gold.add(normalized)
            break
    if not cited or not gold:
        return {"precision": 0.0, "recall": 0.0}
    hits = len(cited & gold)
    return {"precision": hits / len(cited), "recall": hits / len(gold)}


def tool_call_efficiency(
    completion: Completion,
    *,
    correctness: float = 1.0,
    reference_chunk_count: int = 0,
    max_calls: int = 10,
    decay_rate: float = 0.2,
    ranges: Sequence[tuple[int, int | None, float]] | None = None,
) -> float:
    """A reward for searching about as often as needed, counted by :func:`count_search_calls`.

    With ``ranges`` (``(min, max_or_None, score)``, first match wins) the score
    is looked up; otherwise it is ``correctness`` decayed by
    ``exp(-decay_rate * extra)`` for each call past ``reference_chunk_count + 2``,
    and ``0.0`` when incorrect or over ``max_calls``.
    """
    if reference_chunk_count < 0 or max_calls < 0 or decay_rate < 0:
        raise ValueError("reference_chunk_count, max_calls and decay_rate must be non-negative")
    calls = count_search_calls(completion)
    if ranges is not None:
        for low, high, score in ranges:
            if low < 0 or (high is not None and high < low):
                raise ValueError(f"tool-call range ({low}, {high}) must be non-negative and ordered")
            if calls >= low and (high is None or calls <= high):
                return clip01(score)
        return 0.0
    correctness = clip01(correctness)
    if correctness == 0 or calls > max_calls:
        return 0.0
    extra = max(0, calls - (reference_chunk_count + 2))
    return correctness * math.exp(-decay_rate * extra)
