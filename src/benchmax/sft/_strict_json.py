"""The byte-level rules of ``benchmax-sft-v1``: strict parsing, a JSON-tree check, canonical bytes.

Strict means: no duplicate object keys, no ``NaN``/``Infinity`` literals, no
non-finite numbers (``1e999`` overflows to one), no lone surrogates, no Python
types beyond JSON's (subclasses included), string keys only, and at most
:data:`MAX_JSON_DEPTH` levels of nesting. Canonical bytes are UTF-8 with
sorted keys and no spaces, so equal objects give equal bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from benchmax.errors import BenchmaxError

MAX_JSON_DEPTH = 64
_TOO_DEEP = f"JSON nesting exceeds {MAX_JSON_DEPTH} levels"

Emit = Callable[[str, str], None]


class StrictJsonError(BenchmaxError, ValueError):
    """Text that breaks the strict JSON rules; the message says which."""


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJsonError(f"duplicate object key {key!r}")
        result[key] = value
    return result


def _refuse_constant(name: str) -> object:
    raise StrictJsonError(f"non-finite number literal {name!r} is not allowed")


def parse_strict_json(text: str) -> object:
    """One JSON document under the strict rules; :class:`StrictJsonError` says what is wrong."""
    try:
        return json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_refuse_constant)
    except StrictJsonError:
        raise
    except RecursionError:
        raise StrictJsonError(_TOO_DEEP) from None
    except ValueError as exc:
        raise StrictJsonError(f"invalid JSON: {exc}") from None


def _lone_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def check_json_tree(value: object, location: str, emit: Emit) -> bool:
    """Report each strict-JSON violation in ``value`` (document order); whether there were none.

    A container past the depth limit is reported once and not entered.
    """
    clean = True
    pending: list[tuple[object, str, int]] = [(value, location, 1)]
    while pending:
        node, where, depth = pending.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if depth > MAX_JSON_DEPTH:
                emit(where, _TOO_DEEP)
                clean = False
                continue
            children: list[tuple[object, str, int]] = []
            if kind is dict:
                for key, child in node.items():  # type: ignore[attr-defined]
                    if type(key) is not str:
                        emit(where, f"object key {key!r} must be a string")
                        clean = False
                    elif _lone_surrogate(key):
                        emit(where, "object key contains a lone surrogate")
                        clean = False
                    else:
                        children.append((child, f"{where}.{key}", depth + 1))
            else:
                children = [(child, f"{where}[{index}]", depth + 1) for index, child in enumerate(node)]  # type: ignore[arg-type]
            pending.extend(reversed(children))
        elif kind is str:
            if _lone_surrogate(node):  # type: ignore[arg-type]
                emit(where, "string contains a lone surrogate")
                clean = False
        elif kind is float:
            if not math.isfinite(node):  # type: ignore[arg-type]
                emit(where, "number must be finite")
                clean = False
        elif not (kind is int or kind is bool or node is None):
            emit(
                where,
                f"unsupported type {kind.__name__}; only JSON object, array, string, number, boolean, "
                "and null values are allowed",
            )
            clean = False
    return clean


def canonical_json_bytes(value: object) -> bytes:
    """The canonical encoding of a tree that :func:`check_json_tree` accepts."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")).encode()
