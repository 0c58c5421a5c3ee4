"""benchmax 0.2.x's module path ``benchmax.rag.env``: its names, from where they live now."""

from benchmax.rag._env import (
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
