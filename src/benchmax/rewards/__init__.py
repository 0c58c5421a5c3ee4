"""Reward helpers for env code: each returns plain values or ``{component: float}`` dicts.

Families: text (answer extraction, matching, shaping penalties), math
(math-verify equivalence with a hard timeout), retrieval and tool use, code
(test cases in the sandbox), LLM judges (criteria grades, titled rubrics,
pairwise and listwise ranking, adaptive rubrics), diversity scaling, and group
helpers for ``compute_group_rewards``. Every name benchmax 0.2.5 exports here is
here too, with the same meaning. See ``docs/rewards.md``.
"""

from benchmax.envs import content_text
from benchmax.rewards._adaptive import (
    AdaptiveRubrics,
    RubricCache,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
)
from benchmax.rewards._code_tests import (
    CodeTest,
    CodeTestResult,
    code_pass_rate,
    code_rewards,
    outputs_match,
    run_code_tests,
)
from benchmax.rewards._deterministic import (
    AnswerMode,
    Completion,
    answer_block,
    citation_score,
    clip01,
    count_search_calls,
    extract_answer_block,
    overlap_reward,
    percent_of_text_a_in_text_b,
    search_within_budget,
    tool_call_efficiency,
)
from benchmax.rewards._diversity import (
    ClusterResult,
    DiversityConfig,
    LLMDiversityConfig,
    NgramDiversityConfig,
    cluster_texts,
    scale_by_diversity,
)
from benchmax.rewards._evaluate import (
    RankingAnchor,
    RubricEvaluation,
    RubricRanking,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
)
from benchmax.rewards._group import (
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
from benchmax.rewards._judge import Judge, JudgeError, parse_reply
from benchmax.rewards._match import contains, exact_match, normalize_answer, regex_match, token_f1
from benchmax.rewards._maths import (
    MathVerifier,
    MathVerifyUnavailable,
    math_equal,
    math_equal_sync,
    math_reward,
)
from benchmax.rewards._offload import run_in_process, run_sync
from benchmax.rewards._rubric import Criterion, Grade, Rubric, RubricPolarity
from benchmax.rewards._scoring import (
    rank_group_rubrics,
    rubric_reward_key,
    score_group_rubrics,
    score_rubrics,
)
from benchmax.rewards._shaping import format_penalty, length_penalty, tags_in_order
from benchmax.rewards._text import (
    extract_answer,
    extract_boxed,
    extract_code_block,
    extract_completion_text,
    extract_tag,
    last_line,
)
from benchmax.rewards._tool_use import (
    ToolCallRecord,
    called_tool,
    tool_call_counts,
    tool_calls,
    tool_efficiency,
    tool_errors,
    tool_use_rewards,
)

__all__ = [
    "AdaptiveRubrics",
    "AnswerMode",
    "ClusterResult",
    "CodeTest",
    "CodeTestResult",
    "Completion",
    "Criterion",
    "DiversityConfig",
    "Grade",
    "Judge",
    "JudgeError",
    "LLMDiversityConfig",
    "MathVerifier",
    "MathVerifyUnavailable",
    "NgramDiversityConfig",
    "RankingAnchor",
    "Rubric",
    "RubricCache",
    "RubricEvaluation",
    "RubricPolarity",
    "RubricRanking",
    "ToolCallRecord",
    "answer_block",
    "called_tool",
    "citation_score",
    "clip01",
    "cluster_texts",
    "code_pass_rate",
    "code_rewards",
    "contains",
    "content_text",
    "count_search_calls",
    "diversity_scale",
    "evaluate_rubric_ranking",
    "evaluate_single_rubric",
    "exact_match",
    "extract_answer",
    "extract_answer_block",
    "extract_boxed",
    "extract_code_block",
    "extract_completion_text",
    "extract_tag",
    "format_penalty",
    "generate_adaptive_rubrics",
    "generate_and_cache_adaptive_rubrics",
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
    "overlap_reward",
    "pairwise_win_rates",
    "parse_reply",
    "per_rollout",
    "percent_of_text_a_in_text_b",
    "rank_group_rubrics",
    "rank_to_reward",
    "regex_match",
    "rubric_reward_key",
    "run_code_tests",
    "run_in_process",
    "run_sync",
    "scale_by_diversity",
    "score_group_rubrics",
    "score_rubrics",
    "scores_to_ranks",
    "search_within_budget",
    "tags_in_order",
    "token_f1",
    "tool_call_counts",
    "tool_call_efficiency",
    "tool_calls",
    "tool_efficiency",
    "tool_errors",
    "tool_use_rewards",
]
