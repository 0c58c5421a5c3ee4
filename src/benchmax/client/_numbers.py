"""The numbers of a model server's reply, checked before anything keeps them.

A reply is untrusted input: ``"prompt_tokens": 18446744073709551615`` is valid
JSON, yet SQLite keeps 64-bit integers, and the run's sums of such counts
overflow anyway. Every number the client keeps from a reply passes here, so one
out of range makes that reply malformed (naming the field) and fails its own
request, never the store writer later. The response cache reads its entries
through the same checks, so an entry kept before them cannot bring such a
number back.
"""

from __future__ import annotations

import math

MAX_COUNT = 2**31 - 1
"""The largest token count or token id a reply may carry: far above any context window or
vocabulary, and low enough that a run's sums of billions of them stay within 64-bit integers."""


def token_count(value: object, field: str) -> int:
    """A count the server may leave out (``null``, or not a number: 0, "not said"), never overstate.

    A number must be a whole one in ``0..MAX_COUNT``; anything else raises ``ValueError``
    naming ``field``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{field} is {_shown(value)}, not a whole number of tokens")
        value = int(value)
    if not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{field} is {_shown(value)}, not a token count in 0..{MAX_COUNT}")
    return value


def token_ids(value: object, field: str) -> tuple[int, ...] | None:
    """Token ids as given (``None`` when they are not a list of integers), each in ``0..MAX_COUNT``."""
    if not isinstance(value, list) or not all(type(item) is int for item in value):
        return None
    if value and (min(value) < 0 or max(value) > MAX_COUNT):
        index, item = next((index, item) for index, item in enumerate(value) if not 0 <= item <= MAX_COUNT)
        raise ValueError(f"{field}[{index}] is {_shown(item)}, not a token id in 0..{MAX_COUNT}")
    return tuple(value)


def logprob(value: int | float, field: str) -> float:
    """A log-probability: any finite number (servers round; a few write -9999 for "never")."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{field} is {_shown(value)}, not a finite log-probability")
    return number


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
