"""``mask_secrets`` finds a 12-character piece of a key wherever it sits in a text, and leaves a text
without one as it was: the cheap first look it takes (every sixth place) misses no offset."""

from __future__ import annotations

import pytest

from benchmax.auth import mask_secrets

KEY = "sk-live-Zq81Xw4Pm7Rt2Lc9Vb6N"


@pytest.mark.parametrize("start", range(len(KEY) - 12 + 1))
@pytest.mark.parametrize("offset", range(13))
def test_a_piece_of_a_key_is_masked_at_every_offset_of_the_text(offset, start):
    piece = KEY[start : start + 12]
    text = "x" * offset + piece + " and more text after it"

    masked = mask_secrets(text, [KEY])

    assert piece not in masked
    assert masked == "x" * offset + "*** and more text after it"


@pytest.mark.parametrize("length", [0, 5, 11, 12, 13, 400])
def test_a_text_without_a_piece_of_the_key_is_left_as_it_was(length):
    text = ("sk-live-Zq8 " * 40)[:length]
    assert mask_secrets(text, [KEY]) == text
