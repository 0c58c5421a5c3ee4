"""Reward helpers for env code: each returns plain values or ``{component: float}`` dicts.

Families: text (answer extraction, matching, shaping penalties), math
(math-verify equivalence with a hard timeout), tool use, code (test cases in
the sandbox), LLM judges (rubrics, pairwise and listwise ranking) and group
helpers for ``compute_group_rewards``. See ``docs/rewards.md``.
"""

from benchmax.rewards.code_tests import (
    CodeTest,
    CodeTestResult,
    code_pass_rate,
    code_rewards,
    outputs_match,
    run_code_tests,
)
from benchmax.rewards.group import (
    diversity_scale,
    listwise_rank_rewards,
    ngram_clusters,
    normalize_group,
    order_to_ranks,
    pairwise_win_rates,
    per_rollout,
    rank_to_reward,
    scores_to_ranks,
)
from benchmax.rewards.judge import Criterion, Grade, Judge, Rubric, parse_reply
from benchmax.rewards.match import contains, exact_match, normalize_answer, regex_match, token_f1
from benchmax.rewards.maths import (
    MathVerifier,
    MathVerifyUnavailable,
    math_equal,
    math_equal_sync,
    math_reward,
)
from benchmax.rewards.offload import run_in_process, run_sync
from benchmax.rewards.shaping import format_penalty, length_penalty, tags_in_order
from benchmax.rewards.text import (
    content_text,
    extract_answer,
    extract_boxed,
    extract_code_block,
    extract_completion_text,
    extract_tag,
    last_line,
)
from benchmax.rewards.tool_use import (
    ToolCallRecord,
    called_tool,
    tool_call_counts,
    tool_calls,
    tool_efficiency,
    tool_errors,
    tool_use_rewards,
)

__all__ = [
    "CodeTest",
    "CodeTestResult",
    "Criterion",
    "Grade",
    "Judge",
    "MathVerifier",
    "MathVerifyUnavailable",
    "Rubric",
    "ToolCallRecord",
    "called_tool",
    "code_pass_rate",
    "code_rewards",
    "contains",
    "content_text",
    "diversity_scale",
    "exact_match",
    "extract_answer",
    "extract_boxed",
    "extract_code_block",
    "extract_completion_text",
    "extract_tag",
    "format_penalty",
    "last_line",
    "length_penalty",
    "listwise_rank_rewards",
    "math_equal",
    "math_equal_sync",
    "math_reward",
    "ngram_clusters",
    "normalize_answer",
    "normalize_group",
    "order_to_ranks",
    "outputs_match",
    "pairwise_win_rates",
    "parse_reply",
    "per_rollout",
    "rank_to_reward",
    "regex_match",
    "run_code_tests",
    "run_in_process",
    "run_sync",
    "scores_to_ranks",
    "tags_in_order",
    "token_f1",
    "tool_call_counts",
    "tool_calls",
    "tool_efficiency",
    "tool_errors",
    "tool_use_rewards",
]
