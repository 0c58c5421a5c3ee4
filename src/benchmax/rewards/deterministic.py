"""benchmax 0.2.x's module path ``benchmax.rewards.deterministic``: its names, from where they live now."""

from benchmax.rewards._deterministic import (
    Completion,
    citation_score,
    clip01,
    count_search_calls,
    extract_answer_block,
    overlap_reward,
    percent_of_text_a_in_text_b,
    search_within_budget,
    tool_call_efficiency,
)
from benchmax.rewards._text import extract_completion_text

__all__ = [
    "Completion",
    "citation_score",
    "clip01",
    "count_search_calls",
    "extract_answer_block",
    "extract_completion_text",
    "overlap_reward",
    "percent_of_text_a_in_text_b",
    "search_within_budget",
    "tool_call_efficiency",
]
