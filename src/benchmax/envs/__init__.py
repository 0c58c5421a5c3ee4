"""The environment contract: what env authors write and trainers call.

Every public name of benchmax 0.2.x imports from here (and from its 0.2.x
module paths: ``benchmax.envs.base``, ``.dataset``, ``.environment``,
``.identity``, ``.shared_types``, ``.logging``), plus the vocabulary the rest of
benchmax shares: termination reasons, message text, records. Nothing else lives
here: loading an env is :mod:`benchmax.loading`, a served env and its wire format
:mod:`benchmax.remote`, Hugging Face datasets :mod:`benchmax.hf`, the shipped envs
:mod:`benchmax.harbor` and :mod:`benchmax.rag`; 0.2.x's other module paths are
served by :mod:`benchmax.compat`.
"""

from benchmax.auth import InjectedAuth, ModelAuth, ModelRequestContext, StaticBearerAuth, bind_model_auth
from benchmax.envs._capture import LogCollector, capture_logs, install_log_capture
from benchmax.envs._errors import DatasetError, DatasetNotFound, EnvDefinitionError, EnvSpecError, ToolError
from benchmax.envs._messages import (
    CHAT_ROLES,
    check_prompt_messages,
    completion_text,
    content_text,
    is_content_part,
    message_key,
    tool_error_ids,
    tool_message,
    truncate_text,
)
from benchmax.envs._procedural import (
    EndlessDataset,
    EndlessDatasetError,
    LevelledEnv,
    UnknownLevelError,
    check_level,
    has_levels,
    is_endless,
)
from benchmax.envs._records import (
    MAX_REWARD_COMPONENTS,
    MAX_REWARD_NAME_CHARS,
    SPLITS,
    DatasetSplit,
    Example,
    JsonRow,
    LogEntry,
    Message,
    Messages,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    Tool,
    TurnRecord,
    Usage,
    ValidationDiagnostic,
    turn_rewards_total,
)
from benchmax.envs._response import ENV_RESPONSE_ROLES, EnvResponse
from benchmax.envs._runtime import register_engine
from benchmax.envs._scope import HoldClock, RolloutScope, current_scope, enter_scope, group_scope, rollout_scope
from benchmax.envs._termination import (
    SCORABLE_REASONS,
    TerminationReason,
    is_scorable,
    is_scored,
    settle_termination_reason,
)
from benchmax.envs.base import BaseEnv, BaseRollout, JsonlDataset, resolve_dataset_path
from benchmax.envs.base.env import check_env_definition, hook_source, implements, replay_only, shown_path
from benchmax.envs.dataset import (
    Dataset,
    ListDataset,
    collect_dataset_problems,
    collecting_dataset_problems,
    collector_paused,
    resolve_under,
    to_example,
    validate_max_examples,
)
from benchmax.envs.environment import Environment, check_group
from benchmax.envs.identity import canonical_example_id

__all__ = [
    "CHAT_ROLES",
    "ENV_RESPONSE_ROLES",
    "MAX_REWARD_COMPONENTS",
    "MAX_REWARD_NAME_CHARS",
    "SCORABLE_REASONS",
    "SPLITS",
    "BaseEnv",
    "BaseRollout",
    "Dataset",
    "DatasetError",
    "DatasetNotFound",
    "DatasetSplit",
    "EndlessDataset",
    "EndlessDatasetError",
    "EnvDefinitionError",
    "EnvResponse",
    "EnvSpecError",
    "Environment",
    "Example",
    "HoldClock",
    "InjectedAuth",
    "JsonRow",
    "JsonlDataset",
    "LevelledEnv",
    "ListDataset",
    "LogCollector",
    "LogEntry",
    "Message",
    "Messages",
    "ModelAuth",
    "ModelRequestContext",
    "RewardMap",
    "RolloutAttempt",
    "RolloutFailure",
    "RolloutOutcome",
    "RolloutRequest",
    "RolloutScope",
    "SamplingParams",
    "StaticBearerAuth",
    "TerminationReason",
    "Tool",
    "ToolError",
    "TurnRecord",
    "UnknownLevelError",
    "Usage",
    "ValidationDiagnostic",
    "bind_model_auth",
    "canonical_example_id",
    "capture_logs",
    "check_env_definition",
    "check_group",
    "check_level",
    "check_prompt_messages",
    "collect_dataset_problems",
    "collecting_dataset_problems",
    "collector_paused",
    "completion_text",
    "content_text",
    "current_scope",
    "enter_scope",
    "group_scope",
    "has_levels",
    "hook_source",
    "implements",
    "install_log_capture",
    "is_content_part",
    "is_endless",
    "is_scorable",
    "is_scored",
    "message_key",
    "register_engine",
    "replay_only",
    "resolve_dataset_path",
    "resolve_under",
    "rollout_scope",
    "settle_termination_reason",
    "shown_path",
    "to_example",
    "tool_error_ids",
    "tool_message",
    "truncate_text",
    "turn_rewards_total",
    "validate_max_examples",
]
