"""Each package's public surface, pinned: its ``__all__`` is the list here, name for name.

A name added to or taken from a package's surface is a decision (users import it, the docs name it),
so it shows here as a changed line beside the code that changed it; the 0.2.x names are pinned
besides by ``tests/compat/test_name_surface.py``, against the recorded reference."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SURFACE: dict[str, tuple[str, ...]] = {
    "benchmax": (
        "__version__", "evaluate", "open_run",
    ),
    "benchmax.access": (
        "AccessError", "AccessGuard", "COOKIE", "SAFE_METHODS", "bind", "credential_of", "is_loopback",
        "normalize_origin", "private_token_file", "resolve_token",
    ),
    "benchmax.adapters": (
        "ADAPTER_PREFIXES", "InspectEnv", "ReasoningGymEnv", "VerifiersEnv", "adapter_directory", "adapter_env_class",
        "adapter_env_name", "install_line", "is_adapter_spec", "split_seed",
    ),
    "benchmax.agents": (
        "AGENT_ERROR", "ANSWER_NAME", "AgentEnv", "AgentFunction", "AgentRun", "DEFAULT_TIMEOUT",
        "assign_sequences", "calls_to_turns", "transcript",
    ),
    "benchmax.bundle": (
        "Bundle", "BundleMetadata", "BundlingError", "IncompatibleBenchmaxError", "IncompatiblePythonError",
        "IncompatibleRuntimeError", "bundle_digest", "dump_bundle", "load_bundle", "unregistered_local_refs",
        "validate_bundle_compatibility",
    ),
    "benchmax.client": (
        "CACHE_FILE", "CACHE_FORMAT", "CacheError", "CacheSettings", "CallFigures", "CallLedger", "CallLog",
        "CallMeter", "ChatResult", "ClientPool", "ClientStats", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_MAX_BYTES",
        "DEFAULT_MAX_OUTAGE", "DEFAULT_PRICES", "EndpointDown", "EndpointGate", "FailureKind", "GateEvent",
        "HoldClock", "HttpModelClient", "ModelClient", "ModelError", "ModelNotServed", "ModelPrice", "Outage",
        "PRICES_ENV", "PoolStats", "PriceTable", "PriceTableError", "ROLES", "ReplicaRouter", "RequestLimit",
        "ResponseCache", "RetryPolicy", "Role", "ServedModel", "UNSEEDED", "Unseeded", "calls_from_meta",
        "calls_to_meta", "choose_model", "known_usd", "lists_models", "merge_figures", "parse_models",
        "request_key", "scoped_client", "total_usd",
    ),
    "benchmax.compat": (
        "MODULES", "OldModule", "install", "resolve",
    ),
    "benchmax.engine": (
        "Engine", "EngineConfig", "GroupResult", "StoredRollout", "validate_tools",
    ),
    "benchmax.envs": (
        "BaseEnv", "BaseRollout", "CHAT_ROLES", "Dataset", "DatasetError", "DatasetNotFound", "DatasetSplit",
        "ENV_RESPONSE_ROLES", "EndlessDataset", "EndlessDatasetError", "EnvDefinitionError", "EnvResponse",
        "EnvSpecError", "Environment", "Example", "HoldClock", "InjectedAuth", "JsonRow", "JsonlDataset", "LevelledEnv",
        "ListDataset", "LogCollector", "LogEntry", "MAX_REWARD_COMPONENTS", "MAX_REWARD_NAME_CHARS", "Message",
        "Messages", "ModelAuth", "ModelRequestContext", "RewardMap", "RolloutAttempt", "RolloutFailure",
        "RolloutOutcome", "RolloutRequest", "RolloutScope", "SCORABLE_REASONS", "SPLITS", "SamplingParams",
        "StaticBearerAuth", "TerminationReason", "Tool", "ToolError", "TurnRecord", "UnknownLevelError", "Usage",
        "ValidationDiagnostic", "bind_model_auth", "canonical_example_id", "capture_logs", "check_env_definition",
        "check_group", "check_level", "check_prompt_messages", "collect_dataset_problems",
        "collecting_dataset_problems", "collector_paused", "completion_text", "content_text", "current_scope",
        "enter_scope", "group_scope", "has_levels", "hook_source", "implements", "install_log_capture",
        "is_content_part", "is_endless", "is_scorable", "is_scored", "message_key", "register_engine", "replay_only",
        "resolve_dataset_path", "resolve_under", "rollout_scope", "settle_termination_reason", "shown_path",
        "to_example", "tool_error_ids", "tool_message", "truncate_text", "turn_rewards_total", "validate_max_examples",
    ),
    "benchmax.harbor": (
        "BundledAgentSource", "BundledHarborAgent", "CustomSandboxCredentials", "DaytonaCredentials",
        "HarborDataset", "HarborDiagnostic", "HarborEnv", "HarborTrialTemplate", "LOCAL_SANDBOX",
        "LocalSandboxEnvironment", "ModalCredentials", "SandboxCredentials", "require_harbor",
        "sandbox_credentials_scope",
    ),
    "benchmax.hf": (
        "HFDataset",
    ),
    "benchmax.inspector": (
        "InspectorError", "create_app", "export_static", "serve",
    ),
    "benchmax.loading": (
        "ENTRY_POINT_GROUP", "EnvSpec", "ExampleStream", "InstalledEnv", "adapter_name", "collect_examples",
        "data_directories", "data_directory", "example_location", "installed_envs", "load_env", "locate_dataset",
        "open_dataset", "open_examples",
    ),
    "benchmax.local": (
        "EMBEDDED_MODEL_NAME", "EmbeddedModel", "EmbeddedModelError", "PORTABLE_REBUILD", "check_installed",
        "default_threads", "describe_exit", "find_embedded_model",
    ),
    "benchmax.mix": (
        "EnvMix", "MemberSpec", "MixDataset", "MixError", "MixMember", "MixSpec", "SEPARATOR", "close_members",
        "mixture_id",
    ),
    "benchmax.proxy": (
        "DEFAULT_MAX_BODY_BYTES", "ProxyError", "ProxyLease", "RecordedCall", "RecordingProxy",
    ),
    "benchmax.rag": (
        "ANSWER_LENGTH_CAP", "CONCISENESS_RUBRIC", "CORRECTNESS_RUBRIC", "DEFAULT_EMBED_MODEL",
        "MAX_TOOL_OUTPUT_CHARS", "OpenAIEmbedder", "RagEnv", "RagSourceScores", "SearchClient", "SearchResult",
        "canonicalize_source_id", "canonicalize_source_id_loose", "extract_answer_block", "extract_reference_ids",
        "extract_source_ids", "judge_answer_quality", "parse_citations", "score_citation_grounding",
        "score_citations", "score_rag_sources", "score_retrieval_sources", "score_search_efficiency",
    ),
    "benchmax.remote": (
        "MAX_REPLY_BYTES", "RemoteDataset", "RemoteEnv", "is_remote_spec", "remote_env_class", "wire",
    ),
    "benchmax.rewards": (
        "AdaptiveRubrics", "AnswerMode", "ClusterResult", "CodeTest", "CodeTestResult", "Completion", "Criterion",
        "DiversityConfig", "Grade", "Judge", "JudgeError", "LLMDiversityConfig", "MathVerifier",
        "MathVerifyUnavailable", "NgramDiversityConfig", "RankingAnchor", "Rubric", "RubricCache",
        "RubricEvaluation", "RubricPolarity", "RubricRanking", "ToolCallRecord", "answer_block", "called_tool",
        "citation_score", "clip01", "cluster_texts", "code_pass_rate", "code_rewards", "contains", "content_text",
        "count_search_calls", "diversity_scale", "evaluate_rubric_ranking", "evaluate_single_rubric", "exact_match",
        "extract_answer", "extract_answer_block", "extract_boxed", "extract_code_block", "extract_completion_text",
        "extract_tag", "format_penalty", "generate_adaptive_rubrics", "generate_and_cache_adaptive_rubrics",
        "last_line", "length_penalty", "listwise_rank_rewards", "math_equal", "math_equal_sync", "math_reward",
        "ngram_clusters", "normalize_answer", "normalize_group", "order_to_ranks", "outputs_match",
        "overlap_reward", "pairwise_win_rates", "parse_reply", "per_rollout", "percent_of_text_a_in_text_b",
        "rank_group_rubrics", "rank_to_reward", "regex_match", "rubric_reward_key", "run_code_tests",
        "run_in_process", "run_sync", "scale_by_diversity", "score_group_rubrics", "score_rubrics",
        "scores_to_ranks", "search_within_budget", "tags_in_order", "token_f1", "tool_call_counts",
        "tool_call_efficiency", "tool_calls", "tool_efficiency", "tool_errors", "tool_use_rewards",
    ),
    "benchmax.runner": (
        "DEFAULT_CONCURRENCY", "DEFAULT_MAX_FAILURE_RATE", "EMBEDDED", "EXECUTORS", "Endpoint", "EndpointError",
        "GroupExecutor", "GroupKey", "LocalExecutor", "MAX_RESTARTS", "MemberReport", "Problem", "Report",
        "RescoreRefused", "RolloutSlots", "RunConfig", "RunKind", "RunMeta", "RunObserver", "RunOrigin", "RunResult",
        "RunSession", "RunStopped", "RunVerdict", "SlotClaim", "arescore", "arun", "default_run_dir", "env_name",
        "evaluate", "failed_group", "group_keys", "import_run", "judge_run", "model_endpoint", "replay_parts",
        "resolve_examples", "run_provenance", "sampling_for", "target_fields", "validate_env", "validate_mix",
    ),
    "benchmax.sandbox": (
        "BwrapProvider", "BwrapSandbox", "DockerProvider", "DockerSandbox", "ExecResult", "FileInfo", "GuardProvider",
        "GuardSandbox", "Limits", "Mount", "PortForward", "RolloutSandboxes", "Sandbox", "SandboxEnded", "SandboxError",
        "SandboxPool", "SandboxProvider", "SandboxResult", "SandboxSpec", "SandboxUnavailable", "WORKSPACE",
        "default_provider", "find_bwrap", "run_python", "run_python_async", "sandbox_kind",
    ),
    "benchmax.serve": (
        "DEFAULT_HOST", "DEFAULT_PORT", "EnvService", "ServeConfig", "ServeError", "create_app",
        "default_max_sessions", "load_served", "serve",
    ),
    "benchmax.sft": (
        "SFT_DATASET_FORMAT", "SftDataset", "SftDatasetError", "SftIssue",
    ),
    "benchmax.store": (
        "Bar", "CodeDigest", "ComponentStats", "DB_NAME", "DataDigest", "DataFile", "Delta", "EXCERPT_CHARS",
        "EnvDelta", "EnvFigures", "EnvIdentity", "ExamplePass", "FORMATS", "GitState", "GroupRecord", "GroupSpread",
        "GroupWrite", "HEADLINE", "MAX_IMAGE_URI_CHARS", "MAX_PAGE", "MAX_QUEUED_ROLLOUTS", "MIN_SHORT_ID", "Page",
        "Provenance", "ProvenanceChange", "ProvenanceResume", "QUERY_SPEC", "RUN_STATUSES", "ReasonCount",
        "RolloutCost", "RolloutFilter", "RolloutRecord", "RolloutScore", "Run", "RunDiff", "RunMeta", "RunQueries",
        "RunStats", "RunStatus", "RunWriter", "SCHEMA_VERSION", "SQL_PARAMETERS", "Sample", "SchemaError",
        "ScoredGroup", "Spread", "StoreError", "StoredGroup", "TurnRewardStats", "chunks", "compare", "content_line",
        "decode_transcript", "decode_turns", "diff_runs", "export_run", "group_spread", "is_digest", "match_query",
        "open_run", "prompt_excerpt", "provenance_changes", "read_jsonl_export", "run_env", "run_status", "short_ids",
    ),
    "benchmax.telemetry": (
        "CACHE_HIT", "ChatReply", "DEFAULT_EXPORT_TIMEOUT", "ENV_TURN_PREFIX", "ExportTarget", "MAX_CONTENT_CHARS",
        "MAX_QUEUE", "REWARD_PREFIX", "TelemetryError", "TelemetrySession", "TelemetrySettings", "cached_model_call",
        "content_enabled", "end_model_call", "end_rollout", "env_turn_result", "env_turn_span", "export_target",
        "fail_model_call", "fail_span", "finish_model_call", "group_span", "leave_rollout", "shown_url", "span",
        "start_model_call", "start_rollout", "start_telemetry", "stop_telemetry", "tool_result", "tool_span",
        "trace_id", "traced_context", "traced_model_call", "tracer",
    ),
    "benchmax.testing": (
        "ScriptedServer", "ServerProcess", "echo_policy", "embed_text", "find_script", "free_port",
    ),
    "benchmax.traces": (
        "ImportedConversation", "MAX_CONTENT_CHARS", "MAX_LINE_BYTES", "MAX_MESSAGES", "SkippedLine",
        "TraceFormatError", "TraceRead", "looks_like_otlp", "parse_chat_record", "read_chat_jsonl",
        "read_otlp_json", "read_traces",
    ),
    "benchmax.train": (
        "CurriculumError", "DifficultyFilter", "EnvEval", "EnvStep", "EvalSummary", "ExamplePool", "GroupScore",
        "Levels", "POLICY_URL", "PassRateWeights", "Sampler", "StepReport", "TrainConfig", "TrainError", "TrainResult",
        "TrainingSession", "Uniform", "build", "eval_policy", "eval_table", "load_policy_model", "parse_curriculum",
        "run", "train",
    ),
    "benchmax.aio": (
        "LoopThread", "block_on",
    ),
    "benchmax.auth": (
        "AUTH_FLAG_FORM", "BasicAuth", "EnvironmentKeyAuth", "InjectedAuth", "MASK", "ModelAuth", "ModelAuthError",
        "ModelRequestContext", "RequestModelAuth", "StaticBearerAuth", "bind_model_auth", "bound_model_auth",
        "create_async_openai_client", "create_openai_client", "mask_secrets", "parse_auth_binding",
        "portable_model_auth", "redact_url", "redact_urls", "request_secrets", "split_credentials",
    ),
    "benchmax.bounded": (
        "DEFAULT_MAX_REPLY_BYTES", "ReplyTooLarge", "read_reply", "read_reply_sync",
    ),
    "benchmax.errors": (
        "BenchmaxError",
    ),
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(SURFACE))
def test_a_packages_public_names_are_the_ones_pinned(package):
    assert sorted(importlib.import_module(package).__all__) == sorted(SURFACE[package])


def test_every_package_with_a_surface_is_pinned():
    src = Path(importlib.import_module("benchmax").__file__).parent
    packages = {"benchmax"} | {f"benchmax.{path.parent.name}" for path in src.glob("*/__init__.py")}
    packages |= {f"benchmax.{path.stem}" for path in src.glob("*.py") if not path.stem.startswith("_")}
    with_surface = {name for name in packages if hasattr(importlib.import_module(name), "__all__")}
    assert sorted(with_surface - set(SURFACE)) == []
