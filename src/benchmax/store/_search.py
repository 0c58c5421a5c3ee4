"""Text search of rollouts: the words of a query as the full-text index folds them."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def match_query(text: str, *, in_transcript: bool) -> str | None:
    """``text`` as an FTS5 query: every word must begin a word of the searched columns.

    Words are runs of letters and digits (the index's ``unicode61`` rule), so no
    FTS5 syntax in the text can reach the query; ``None`` when it has no word.
    """
    words = _WORD.findall(_fold(text))
    if not words:
        return None
    terms = " ".join(f'"{word}"*' for word in words)
    return terms if in_transcript else f"{{answer error ids}} : ({terms})"


def search_words(*texts: str | None) -> list[str]:
    """The distinct words of ``texts`` as the search index holds them (folded, sorted)."""
    return sorted({word for text in texts if text for word in _WORD.findall(_fold(text))})


def _fold(text: str) -> str:
    """Lower case without diacritics, as the index's tokenizer folds words."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(ch))


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
