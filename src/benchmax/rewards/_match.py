"""Comparing an answer with references: exact match, token F1, substring and regex checks.

Each check returns 1.0 or 0.0 (F1: a fraction), so it drops straight into a
reward dict. Several references may be given; the best match counts.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD-style normal form: NFKC, lower case, no punctuation, articles or extra spaces."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _references(reference: str | Iterable[str]) -> list[str]:
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise ValueError("at least one reference answer is needed")
    return [str(ref) for ref in refs]


def exact_match(prediction: str, reference: str | Iterable[str], *, normalize: bool = True) -> float:
    """1.0 when ``prediction`` equals a reference (after :func:`normalize_answer` by default)."""
    if normalize:
        pred = normalize_answer(prediction)
        return float(any(pred == normalize_answer(ref) for ref in _references(reference)))
    pred = prediction.strip()
    return float(any(pred == ref.strip() for ref in _references(reference)))


def token_f1(prediction: str, reference: str | Iterable[str]) -> float:
    """Best bag-of-tokens F1 against the references, on normalised text.

    Two empty texts score 1.0; one empty text scores 0.0.
    """
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for ref in _references(reference):
        ref_tokens = normalize_answer(ref).split()
        if not pred_tokens or not ref_tokens:
            best = max(best, float(pred_tokens == ref_tokens))
            continue
        common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
        if common:
            precision = common / len(pred_tokens)
            recall = common / len(ref_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains(
    text: str,
    needles: str | Iterable[str],
    *,
    require_all: bool = False,
    case_sensitive: bool = False,
    normalize: bool = False,
) -> float:
    """1.0 when ``text`` contains any (or, with ``require_all``, every) needle."""
    items = [needles] if isinstance(needles, str) else list(needles)
    if not items:
        raise ValueError("contains() needs at least one needle")
    if normalize:
        text, items = normalize_answer(text), [normalize_answer(item) for item in items]
    elif not case_sensitive:
        text, items = text.casefold(), [item.casefold() for item in items]
    found = (item in text for item in items)
    return float(all(found) if require_all else any(found))


def regex_match(text: str, pattern: str | re.Pattern[str], *, fullmatch: bool = False, flags: int = 0) -> float:
    """1.0 when ``pattern`` is found in ``text`` (or matches all of it with ``fullmatch``).

    The pattern is yours and the text is the model's: avoid nested quantifiers
    like ``(a+)+`` that backtrack for ever on hostile input.
    """
    compiled = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
    found = compiled.fullmatch(text.strip()) if fullmatch else compiled.search(text)
    return float(found is not None)
