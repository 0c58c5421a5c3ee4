import re

import pytest

from benchmax.rewards import contains, exact_match, normalize_answer, regex_match, token_f1


def test_normalize_answer_drops_case_punctuation_articles_and_spaces():
    assert normalize_answer("  The  Eiffel-Tower! ") == "eiffeltower"
    assert normalize_answer("\uff30\uff41\uff52\uff49\uff53") == "paris"  # full-width letters


def test_exact_match_normalises_by_default_and_accepts_several_references():
    assert exact_match("The Paris.", "paris") == 1.0
    assert exact_match("Lyon", ["Paris", "lyon"]) == 1.0
    assert exact_match("The Paris.", "paris", normalize=False) == 0.0
    assert exact_match(" Paris ", "Paris", normalize=False) == 1.0


def test_exact_match_needs_a_reference():
    with pytest.raises(ValueError, match="at least one reference"):
        exact_match("x", [])


def test_token_f1_scores_partial_overlap():
    assert token_f1("the cat sat", "cat sat down") == pytest.approx(0.8)
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("", "") == 1.0
    assert token_f1("", "cat") == 0.0
    assert token_f1("cat sat", ["dog", "cat sat"]) == 1.0


def test_contains_any_or_all_needles():
    assert contains("Hello World", "world") == 1.0
    assert contains("Hello World", "world", case_sensitive=True) == 0.0
    assert contains("a b", ["a", "z"]) == 1.0
    assert contains("a b", ["a", "z"], require_all=True) == 0.0
    assert contains("The Answer: Paris!", "answer paris", normalize=True) == 1.0


def test_regex_match_searches_or_fullmatches():
    assert regex_match("answer is 42.", r"\b42\b") == 1.0
    assert regex_match("answer is 42.", r"\d+", fullmatch=True) == 0.0
    assert regex_match(" 42 \n", r"\d+", fullmatch=True) == 1.0
    assert regex_match("ABC", re.compile("abc", re.IGNORECASE)) == 1.0
