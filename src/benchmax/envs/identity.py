"""Content-addressed example ids.

A payload's id is the SHA-256 of its canonical JSON (sorted keys, no spaces,
UTF-8), so the same row gets the same id on any machine and in any key order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` deterministically; raises TypeError for non-JSON values."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def canonical_example_id(payload: Mapping[str, Any]) -> str:
    """The stable id of an example payload: ``sha256:`` plus 24 hex digits."""
    digest = hashlib.sha256(canonical_json(dict(payload))).hexdigest()
    return f"sha256:{digest[:24]}"
