"""Content-addressed example ids: the same row gets the same id on any machine, in any key order.

The id is benchmax 0.2.x's: the SHA-256 hex digest of ``{"v": 1, "value": ...}``
serialised as canonical JSON (sorted keys, no spaces, UTF-8), after the value is
normalised to what JavaScript can represent (integral floats become ints,
``-0.0`` becomes ``0``; non-finite numbers, unsafe integers, non-string keys and
invalid UTF-8 are refused).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["canonical_example_id"]

_SAFE_INT = 2**53 - 1


def canonical_example_id(value: Any) -> str:
    """The stable id of a JSON value (an example payload): 64 hex digits."""
    return identify(value)[0]


def identify(value: Any) -> tuple[str, bool]:
    """:func:`canonical_example_id`, and whether ``value`` proved plain JSON on the way
    (:func:`is_plain_json` without floats), so a dataset need not check it again."""
    if is_plain_json(value):
        # nothing to normalise: the value is its own canonical form (orjson refuses the
        # strings that are not valid UTF-8; those take the slow path, which says why)
        try:
            document = orjson.dumps({"v": 1, "value": value}, option=orjson.OPT_SORT_KEYS)
            return hashlib.sha256(document).hexdigest(), True
        except orjson.JSONEncodeError:
            pass
    normalised, has_float = _normalise(value)
    document = {"v": 1, "value": normalised}
    if has_float:
        # Floats must be spelled as Python's json spells them; orjson's shortest
        # form differs (1e+16 vs 1e16), and ids must not change.
        data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    else:
        data = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest(), False


def plain_example_id(value: Any) -> str:
    """:func:`canonical_example_id` of a value already known to be plain JSON without floats
    (:func:`is_plain_json`): its own canonical form, so it is hashed without checking it again.
    A dataset checks each row once as it is built and names it only when asked."""
    return hashlib.sha256(orjson.dumps({"v": 1, "value": value}, option=orjson.OPT_SORT_KEYS)).hexdigest()


def is_plain_json(value: Any, *, floats: bool = False) -> bool:
    """Whether ``value`` holds only dicts with string keys, lists, strings, safe ints, bools,
    ``None`` and (with ``floats``) finite floats, each of exactly that type: a value that JSON
    reads back as an equal one, of the same types and in the same order. Checked without
    copying it.

    A dataset of a million rows checks each one (without floats: such a row's id needs no
    normalising), so this is the hot path of loading one."""
    kind = type(value)
    if kind is dict:
        for key in value:
            if type(key) is not str:
                return False
        items: Any = value.values()
    elif kind is list:
        items = value
    elif kind is int:
        return -_SAFE_INT <= value <= _SAFE_INT
    elif kind is float:
        return floats and math.isfinite(value)
    else:
        return kind is str or kind is bool or value is None
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_SAFE_INT <= item <= _SAFE_INT:
                return False
        elif not is_plain_json(item, floats=floats):
            return False
    return True


def _normalise(value: Any) -> tuple[Any, bool]:
    if value is None or isinstance(value, bool):
        return value, False
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("strings used for identity must be valid UTF-8") from None
        return value, False
    if isinstance(value, int):
        if not -_SAFE_INT <= value <= _SAFE_INT:
            raise ValueError(f"integer {value} is outside JavaScript's safe range and cannot be used for identity")
        return value, False
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is a non-finite number and cannot be used for identity")
        if value == 0:
            return 0, False
        if value.is_integer():
            return _normalise(int(value))
        return value, True
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        floats = False
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"JSON object keys used for identity must be strings, got {key!r}")
            result[key], has = _normalise(item)
            floats = floats or has
        return result, floats
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        items = []
        floats = False
        for item in value:
            normalised, has = _normalise(item)
            items.append(normalised)
            floats = floats or has
        return items, floats
    raise ValueError(
        f"{type(value).__name__} is not a JSON value (not JSON-canonicalizable) and cannot be used for identity"
    )
