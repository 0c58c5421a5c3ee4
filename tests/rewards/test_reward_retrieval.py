"""benchmax 0.2's judge-free helpers for retrieval and tool-use envs."""

from __future__ import annotations

import math

import pytest

from benchmax.rewards import (
    citation_score,
    clip01,
    count_search_calls,
    extract_answer_block,
    overlap_reward,
    percent_of_text_a_in_text_b,
    search_within_budget,
    tool_call_efficiency,
)

CHUNKS = [
    {"content": "Paris is the capital of France.", "metadata": {"source_id": " doc-1 ", "file": "a.md"}},
    {"content": "It lies on the Seine.", "metadata": {"file": "b.md"}},
    {"content": "no metadata"},
]


def transcript(answer: str) -> list[dict]:
    return [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer}]


def test_the_answer_block_is_the_first_tagged_one_or_the_whole_text():
    assert extract_answer_block("x <ANSWER> Paris </answer> <answer>Lyon</answer>") == "Paris"
    assert extract_answer_block("  just prose \n") == "just prose"
    assert extract_answer_block("") == ""


def test_clip01_clamps_and_refuses_what_is_not_a_finite_number():
    assert [clip01(v) for v in (-1, 0.25, 7, "0.5", None, "x", math.inf, math.nan)] == [
        0.0,
        0.25,
        1.0,
        0.5,
        0.0,
        0.0,
        0.0,
        0.0,
    ]


def test_overlap_is_the_share_of_the_reference_reproduced_in_order():
    assert percent_of_text_a_in_text_b("abcd", "xxabcdxx") == 1.0
    assert percent_of_text_a_in_text_b("abcd", "ab") == 0.5
    assert percent_of_text_a_in_text_b("", "anything") == 0.0
    assert overlap_reward(transcript("Paris is the capital of France."), "ignored", reference_chunks=CHUNKS[:1]) == 1.0
    assert overlap_reward("Pa", "Paris is big", minimum_overlap=0.5) == 0.0
    assert overlap_reward("anything", None) == 0.0
    with pytest.raises(ValueError, match="minimum_overlap"):
        overlap_reward("a", "b", minimum_overlap=2)


def test_search_calls_are_counted_from_tool_call_markers_in_assistant_text():
    messages = [
        {"role": "assistant", "content": "<tool_call>{}</tool_call> and <tool_call>{}</tool_call>"},
        {"role": "tool", "content": "<tool_call> in a tool result does not count"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
    ]
    assert count_search_calls(messages) == 2
    assert count_search_calls("<tool_call>") == 1
    assert search_within_budget(3, 3) and not search_within_budget(4, 3)
    with pytest.raises(ValueError, match="non-negative"):
        search_within_budget(-1, 3)


def test_citations_score_precision_and_recall_against_the_first_present_field():
    answer = transcript("Capital [Source: doc-1] on a river [source: b.md] and [Source: made-up]")
    assert citation_score(answer, CHUNKS, source_field=("source_id", "file")) == {
        "precision": pytest.approx(2 / 3),
        "recall": 1.0,
    }
    assert citation_score(answer, CHUNKS) == {"precision": pytest.approx(1 / 3), "recall": 1.0}
    assert citation_score(transcript("no citations"), CHUNKS) == {"precision": 0.0, "recall": 0.0}
    lower = citation_score(transcript("[Source: DOC-1]"), CHUNKS, canonicalize=lambda s: s.strip().lower())
    assert lower == {"precision": 1.0, "recall": 1.0}
    with pytest.raises(ValueError, match="at least one"):
        citation_score(answer, CHUNKS, source_field=())


def test_tool_call_efficiency_decays_past_the_expected_number_of_searches():
    five = "<tool_call>" * 5
    assert tool_call_efficiency(five, reference_chunk_count=1) == pytest.approx(math.exp(-0.2 * 2))
    assert tool_call_efficiency(five, correctness=0.5, reference_chunk_count=3) == 0.5
    assert tool_call_efficiency(five, max_calls=4) == 0.0
    assert tool_call_efficiency(five, correctness=0) == 0.0
    assert tool_call_efficiency(five, ranges=[(0, 2, 1.0), (3, None, 0.4)]) == 0.4
    assert tool_call_efficiency(five, ranges=[(0, 2, 1.0)]) == 0.0
    with pytest.raises(ValueError, match="ordered"):
        tool_call_efficiency(five, ranges=[(3, 1, 1.0)])


_ANSWER_CASES = [
    ("think <answer>A</answer> then <answer> B </answer>", "A", "B"),
    ("<answer>cut off", "<answer>cut off", "cut off"),
    ("no tag at all", "no tag at all", ""),
    ("x <ANSWER> Paris </answer>", "Paris", "Paris"),
    ("", "", ""),
]


@pytest.mark.parametrize(("text", "lenient", "strict"), _ANSWER_CASES)
def test_answer_block_reads_each_mode_as_its_0_2_x_function_did(text, lenient, strict):
    from benchmax.rag import extract_answer_block as rag_extract
    from benchmax.rewards import answer_block

    assert answer_block(text, mode="lenient") == extract_answer_block(text) == lenient
    assert answer_block(text, mode="strict") == rag_extract(text) == strict


def test_answer_block_refuses_an_unknown_mode():
    from benchmax.rewards import answer_block

    with pytest.raises(ValueError, match="lenient' or 'strict'"):
        answer_block("<answer>x</answer>", mode="loose")  # type: ignore[arg-type]
