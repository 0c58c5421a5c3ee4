"""Every public name of benchmax 0.2.5 imports from the same module path, as the same object.

``SURFACE`` is 0.2.5's ``__all__`` per module (``benchmax.bundle`` has none:
its public functions and classes). test_side_by_side.py checks the list
against the live 0.2.5 package.
"""

from __future__ import annotations

import importlib

import pytest

SURFACE: dict[str, list[str]] = {
    "benchmax.auth": [
        "InjectedAuth",
        "ModelAuth",
        "ModelRequestContext",
        "RequestModelAuth",
        "StaticBearerAuth",
        "bind_model_auth",
        "create_async_openai_client",
        "create_openai_client",
    ],
    "benchmax.bundle": [
        "Bundle",
        "BundleMetadata",
        "BundlingError",
        "IncompatibleBenchmaxError",
        "IncompatiblePythonError",
        "IncompatibleRuntimeError",
        "bundle_digest",
        "dump_bundle",
        "load_bundle",
        "unregistered_local_refs",
        "validate_bundle_compatibility",
    ],
    "benchmax.envs": [
        "BaseEnv",
        "BaseRollout",
        "Dataset",
        "DatasetSplit",
        "Environment",
        "Example",
        "InjectedAuth",
        "JsonRow",
        "JsonlDataset",
        "Message",
        "Messages",
        "ModelAuth",
        "RewardMap",
        "RolloutAttempt",
        "RolloutFailure",
        "RolloutOutcome",
        "RolloutRequest",
        "StaticBearerAuth",
        "Tool",
        "ValidationDiagnostic",
        "bind_model_auth",
        "canonical_example_id",
    ],
    "benchmax.envs.base": [
        "BaseEnv",
        "BaseRollout",
        "JsonRow",
        "JsonlDataset",
        "Message",
        "Messages",
        "Tool",
        "resolve_dataset_path",
    ],
    "benchmax.envs.dataset": ["Dataset", "validate_max_examples"],
    "benchmax.envs.environment": ["Environment"],
    "benchmax.envs.harbor": [
        "BundledAgentSource",
        "BundledHarborAgent",
        "CustomSandboxCredentials",
        "DaytonaCredentials",
        "HarborDataset",
        "HarborEnv",
        "HarborTrialTemplate",
        "ModalCredentials",
        "SandboxCredentials",
    ],
    "benchmax.envs.harbor.bundled_agent": ["BundledAgentSource", "BundledHarborAgent"],
    "benchmax.envs.harbor.credentials": [
        "CustomSandboxCredentials",
        "DaytonaCredentials",
        "ModalCredentials",
        "SandboxCredentials",
    ],
    "benchmax.envs.harbor.dataset": ["HarborDataset"],
    "benchmax.envs.harbor.dep_check": ["require_harbor"],
    "benchmax.envs.harbor.env": ["HarborEnv"],
    "benchmax.envs.harbor.types": ["HarborTrialTemplate"],
    "benchmax.envs.identity": ["canonical_example_id"],
    "benchmax.envs.logging": ["_CURRENT_GROUP_RIDS", "_CURRENT_ROLLOUT_ID", "group_context", "rollout_context"],
    "benchmax.envs.shared_types": [
        "DatasetSplit",
        "Example",
        "RewardMap",
        "RolloutAttempt",
        "RolloutFailure",
        "RolloutOutcome",
        "RolloutRequest",
        "ValidationDiagnostic",
    ],
    "benchmax.rag": ["DEFAULT_EMBED_MODEL", "OpenAIEmbedder", "RagEnv", "SearchClient", "SearchResult"],
    "benchmax.rewards": [
        "AdaptiveRubrics",
        "ClusterResult",
        "Completion",
        "DiversityConfig",
        "Judge",
        "JudgeError",
        "LLMDiversityConfig",
        "NgramDiversityConfig",
        "RankingAnchor",
        "Rubric",
        "RubricCache",
        "RubricEvaluation",
        "RubricPolarity",
        "RubricRanking",
        "citation_score",
        "clip01",
        "cluster_texts",
        "count_search_calls",
        "evaluate_rubric_ranking",
        "evaluate_single_rubric",
        "extract_answer_block",
        "extract_completion_text",
        "generate_adaptive_rubrics",
        "generate_and_cache_adaptive_rubrics",
        "overlap_reward",
        "percent_of_text_a_in_text_b",
        "rank_group_rubrics",
        "rubric_reward_key",
        "scale_by_diversity",
        "score_group_rubrics",
        "score_rubrics",
        "search_within_budget",
        "tool_call_efficiency",
    ],
    "benchmax.sft": ["SFT_DATASET_FORMAT", "SftDataset", "SftDatasetError", "SftIssue"],
    "benchmax.envs.base.dataset": ["JsonRow", "JsonlDataset", "resolve_dataset_path"],
    "benchmax.envs.base.env": ["BaseEnv", "BaseRollout"],
    "benchmax.envs.base.openai_types": ["Message", "Messages", "Tool"],
    "benchmax.rewards.adaptive": [
        "AdaptiveRubrics", "RubricCache", "generate_adaptive_rubrics", "generate_and_cache_adaptive_rubrics",
        "prompt_key",
    ],
    "benchmax.rewards.deterministic": [
        "Completion", "citation_score", "clip01", "count_search_calls", "extract_answer_block",
        "extract_completion_text", "overlap_reward", "percent_of_text_a_in_text_b", "search_within_budget",
        "tool_call_efficiency",
    ],
    "benchmax.rewards.diversity": [
        "ClusterResult", "DiversityConfig", "LLMDiversityConfig", "NgramDiversityConfig", "cluster_texts",
        "scale_by_diversity",
    ],
    "benchmax.rewards.judge": ["Judge", "JudgeError"],
    "benchmax.rewards.prompts": [
        "build_adaptive_rubric_prompt", "build_diversity_prompt", "build_rubric_evaluation_prompt",
        "build_rubric_ranking_prompt",
    ],
    "benchmax.rewards.rubric": [
        "RankingAnchor", "Rubric", "RubricEvaluation", "RubricPolarity", "RubricRanking", "evaluate_rubric_ranking",
        "evaluate_single_rubric",
    ],
    "benchmax.rewards.scoring": ["rank_group_rubrics", "rubric_reward_key", "score_group_rubrics", "score_rubrics"],
    "benchmax.rag.embed": ["DEFAULT_EMBED_MODEL", "OpenAIEmbedder"],
    "benchmax.rag.env": [
        "RagEnv", "RagSourceScores", "canonicalize_source_id", "canonicalize_source_id_loose", "extract_answer_block",
        "extract_reference_ids", "extract_source_ids", "judge_answer_quality", "parse_citations",
        "score_citation_grounding",
        "score_citations", "score_rag_sources", "score_retrieval_sources", "score_search_efficiency",
    ],
    "benchmax.rag.search": ["SearchClient", "SearchResult"],
    "benchmax.sft.dataset": ["SFT_DATASET_FORMAT", "SftDataset"],
    "benchmax.sft.issues": ["SftDatasetError", "SftIssue"],
    "benchmax.sft.rows": [
        "MAX_MESSAGES", "MAX_METADATA_BYTES", "MAX_ROW_BYTES", "MAX_TOOLS", "RESERVED_METADATA_PREFIX", "validate_row",
    ],
    "benchmax.sft.strict_json": [
        "MAX_JSON_DEPTH", "StrictJsonError", "canonical_json_bytes", "check_json_tree", "parse_strict_json",
    ],
}  # fmt: skip

# Names 0.2.5 exports from several modules; there, each is one object.
SHARED = [
    ("benchmax.envs", "benchmax.envs.base", "BaseEnv"),
    ("benchmax.envs", "benchmax.envs.base", "BaseRollout"),
    ("benchmax.envs", "benchmax.envs.base", "JsonlDataset"),
    ("benchmax.envs", "benchmax.envs.base", "JsonRow"),
    ("benchmax.envs", "benchmax.envs.dataset", "Dataset"),
    ("benchmax.envs", "benchmax.envs.environment", "Environment"),
    ("benchmax.envs", "benchmax.envs.identity", "canonical_example_id"),
    ("benchmax.envs", "benchmax.envs.shared_types", "Example"),
    ("benchmax.envs", "benchmax.envs.shared_types", "RolloutAttempt"),
    ("benchmax.envs", "benchmax.envs.shared_types", "RolloutFailure"),
    ("benchmax.envs", "benchmax.envs.shared_types", "RolloutOutcome"),
    ("benchmax.envs", "benchmax.envs.shared_types", "RolloutRequest"),
    ("benchmax.envs", "benchmax.envs.shared_types", "ValidationDiagnostic"),
    ("benchmax.envs.harbor", "benchmax.envs.harbor.env", "HarborEnv"),
    ("benchmax.envs.harbor", "benchmax.envs.harbor.dataset", "HarborDataset"),
    ("benchmax.envs.harbor", "benchmax.envs.harbor.types", "HarborTrialTemplate"),
    ("benchmax.envs.harbor", "benchmax.envs.harbor.bundled_agent", "BundledHarborAgent"),
    ("benchmax.envs.harbor", "benchmax.envs.harbor.credentials", "SandboxCredentials"),
    ("benchmax.envs", "benchmax.auth", "StaticBearerAuth"),
    ("benchmax.envs", "benchmax.auth", "InjectedAuth"),
    ("benchmax.envs", "benchmax.auth", "ModelAuth"),
    ("benchmax.envs", "benchmax.auth", "bind_model_auth"),
]


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_every_0_2_5_name_imports_from_its_module(module):
    loaded = importlib.import_module(module)
    missing = [name for name in SURFACE[module] if not hasattr(loaded, name)]
    assert not missing, f"{module} lacks {missing}"
    declared = getattr(loaded, "__all__", None)
    if declared is not None:
        assert set(SURFACE[module]) <= set(declared), f"{module}.__all__ lacks {set(SURFACE[module]) - set(declared)}"


@pytest.mark.parametrize(("first", "second", "name"), SHARED, ids=lambda value: str(value))
def test_a_name_exported_twice_is_one_object(first, second, name):
    assert getattr(importlib.import_module(first), name) is getattr(importlib.import_module(second), name)
