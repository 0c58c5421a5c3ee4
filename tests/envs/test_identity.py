"""Example ids are benchmax 0.2.x's content hashes, whichever path computes them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from benchmax.envs import canonical_example_id


def spelled_out(value: Any) -> str:
    """The id as the contract defines it, computed with nothing but the standard library."""
    document = json.dumps({"v": 1, "value": value}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(document.encode()).hexdigest()


PLAIN = [
    {"prompt_messages": [{"role": "user", "content": "What is 2 + 3?"}], "answer": 5},
    {"b": [1, [2, [3, None]], {"z": True, "a": False}], "a": "é ✓ 数学 🙂", "": ""},
    {"big": 2**53 - 1, "small": -(2**53 - 1), "zero": 0},
    [],
    "a bare string",
    None,
]


@pytest.mark.parametrize("value", PLAIN, ids=range(len(PLAIN)))
def test_a_plain_payload_hashes_to_the_contract_definition(value: Any) -> None:
    assert canonical_example_id(value) == spelled_out(value)


def test_key_order_does_not_change_the_id() -> None:
    shuffled = {"b": {"x": 3, "y": 2}, "a": 1}
    assert canonical_example_id({"a": 1, "b": {"y": 2, "x": 3}}) == canonical_example_id(shuffled)


def test_floats_and_tuples_are_normalised_to_what_javascript_sees() -> None:
    assert canonical_example_id({"n": 1.0, "z": -0.0}) == spelled_out({"n": 1, "z": 0})
    assert canonical_example_id({"x": (1, 2)}) == spelled_out({"x": [1, 2]})
    assert canonical_example_id({"f": 1e-07}) == spelled_out({"f": 1e-07})
    assert canonical_example_id({"f": 0.1}) == spelled_out({"f": 0.1})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"s": "\ud800"}, "valid UTF-8"),
        ({"n": 2**53}, "safe range"),
        ({"n": [float("nan")]}, "non-finite"),
        ({1: "x"}, "must be strings"),
        ({"x": {1, 2}}, "not a JSON value"),
        ({"x": b"bytes"}, "not JSON-canonicalizable"),
    ],
)
def test_a_value_without_an_id_is_refused_with_the_reason(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        canonical_example_id(value)
