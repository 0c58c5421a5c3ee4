"""Retrieval-augmented envs: ``RagEnv`` over any ``SearchClient``, and query embeddings.

Beyond benchmax 0.2.5's exports, the reward pieces ``RagEnv`` is built from
(citation and retrieval scores, the strict ``extract_answer_block``, the
correctness rubric) are exported for envs that write their own
``compute_reward``.
"""

from benchmax.rag._embed import DEFAULT_EMBED_MODEL, OpenAIEmbedder
from benchmax.rag._env import (
    ANSWER_LENGTH_CAP,
    CONCISENESS_RUBRIC,
    CORRECTNESS_RUBRIC,
    MAX_TOOL_OUTPUT_CHARS,
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
from benchmax.rag._search import SearchClient, SearchResult

__all__ = [
    "ANSWER_LENGTH_CAP",
    "CONCISENESS_RUBRIC",
    "CORRECTNESS_RUBRIC",
    "DEFAULT_EMBED_MODEL",
    "MAX_TOOL_OUTPUT_CHARS",
    "OpenAIEmbedder",
    "RagEnv",
    "RagSourceScores",
    "SearchClient",
    "SearchResult",
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
