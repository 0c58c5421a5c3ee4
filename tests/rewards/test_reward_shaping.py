import pytest

from benchmax.rewards import format_penalty, length_penalty, tags_in_order


def test_length_penalty_is_zero_within_the_limit_and_ramps_to_minus_scale():
    assert length_penalty("x" * 100, 100) == 0.0
    assert length_penalty("x" * 150, 100) == pytest.approx(-0.5)
    assert length_penalty("x" * 500, 100) == -1.0
    assert length_penalty(300, 200, ramp=0.5, scale=2.0) == -2.0


def test_length_penalty_counts_words_and_can_be_a_hard_cliff():
    assert length_penalty("a b c d", 3, unit="words", ramp=0) == -1.0
    assert length_penalty("a b c", 3, unit="words", ramp=0) == 0.0
    with pytest.raises(ValueError, match="limit must be positive"):
        length_penalty("x", 0)


def test_tags_in_order_needs_each_tag_once_closed_and_in_order():
    good = "<think>plan</think>\n<answer>4</answer>"
    assert tags_in_order(good)
    assert tags_in_order(good, strict=True)
    assert not tags_in_order("<answer>4</answer><think>plan</think>")
    assert not tags_in_order("<think>a</think><think>b</think><answer>4</answer>")
    assert not tags_in_order("<think>plan<answer>4</answer>")
    assert tags_in_order("intro <think>p</think> <answer>4</answer>")
    assert not tags_in_order("intro <think>p</think> <answer>4</answer>", strict=True)


def test_format_penalty_combines_tag_boxed_and_pattern_checks():
    assert format_penalty("<answer>4</answer>") == 0.0
    assert format_penalty("4") == -1.0
    assert format_penalty(r"<answer>\boxed{4}</answer>", boxed=True) == 0.0
    assert format_penalty("<answer>4</answer>", boxed=True, penalty=0.5) == -0.5
    assert format_penalty("Final: 4", tags=(), pattern=r"^Final: \d+$") == 0.0
    assert format_penalty("final 4", tags=(), pattern=r"^Final: \d+$") == -1.0
