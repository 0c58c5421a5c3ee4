"""benchmax 0.2.x's module path ``benchmax.rag.env``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.envs import BaseEnv, BaseRollout, Example, InjectedAuth, JsonlDataset, ModelAuth, canonical_example_id  # noqa: F401
from benchmax.rag._env import (  # noqa: F401
    ANSWER_LENGTH_CAP,
    CONCISENESS_RUBRIC,
    CORRECTNESS_RUBRIC,
    MAX_TOOL_OUTPUT_CHARS,
    SEARCH_EFFICIENCY_DECAY_RATE,
    TOOL_OUTPUT_TRUNCATION_SUFFIX,
    RagEnv,
    RagSourceScores,
    canonicalize_source_id,
    canonicalize_source_id_loose,
    extract_answer_block,
    extract_reference_ids,
    extract_source_ids,
    judge_answer_quality,
    parse_citations,
    score_citation_grounding,
    score_citations,
    score_rag_sources,
    score_retrieval_sources,
    score_search_efficiency,
)
from benchmax.rag._search import SearchClient  # noqa: F401
from benchmax.rewards import (  # noqa: F401
    Judge,
    Rubric,
    clip01,
    evaluate_single_rubric,
    extract_completion_text,
    search_within_budget,
)

_extract_answer_block = extract_answer_block
"""0.2.5's own tests import the extractor under this name (``extract_answer_block is _extract_answer_block``)."""

__all__ = [
    "RagEnv",
    "RagSourceScores",
    "canonicalize_source_id",
    "canonicalize_source_id_loose",
    "extract_answer_block",
    "extract_reference_ids",
    "extract_source_ids",
    "judge_answer_quality",
    "parse_citations",
    "score_citation_grounding",
    "score_citations",
    "score_rag_sources",
    "score_retrieval_sources",
    "score_search_efficiency",
]
