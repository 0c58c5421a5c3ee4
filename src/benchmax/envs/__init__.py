"""The environment contract: what env authors write and trainers call.

Every public name of benchmax 0.2.x imports from here (and from its 0.2.x
module paths: ``benchmax.envs.base``, ``.dataset``, ``.environment``,
``.identity``, ``.shared_types``, ``.logging``), plus the vocabulary the rest of
benchmax shares: termination reasons, message text, records, the env loader.
"""

from benchmax.auth import InjectedAuth, ModelAuth, ModelRequestContext, StaticBearerAuth, bind_model_auth
from benchmax.envs import _wire as wire
from benchmax.envs._errors import DatasetError, DatasetNotFound, EnvDefinitionError, EnvSpecError, ToolError
from benchmax.envs._hf import HFDataset
from benchmax.envs._loading import (
    EnvSpec,
    ExampleStream,
    collect_examples,
    data_directories,
    data_directory,
    example_location,
    load_env,
    locate_dataset,
    open_dataset,
    open_examples,
)
from benchmax.envs._messages import (
    CHAT_ROLES,
    check_prompt_messages,
    completion_text,
    content_text,
    is_content_part,
    tool_error_ids,
    tool_message,
)
from benchmax.envs._packages import ENTRY_POINT_GROUP, InstalledEnv, installed_envs
from benchmax.envs._records import LogEntry, SamplingParams, TurnRecord, Usage
from benchmax.envs._remote import RemoteDataset, RemoteEnv, is_remote_spec
from benchmax.envs._runtime import register_engine
from benchmax.envs._scope import HoldClock, RolloutScope, current_scope, enter_scope, group_scope, rollout_scope
from benchmax.envs._termination import (
    SCORABLE_REASONS,
    TerminationReason,
    is_scorable,
    is_scored,
    settle_termination_reason,
)
from benchmax.envs._types import (
    MAX_REWARD_COMPONENTS,
    MAX_REWARD_NAME_CHARS,
    SPLITS,
    DatasetSplit,
    JsonRow,
    Message,
    Messages,
    RewardMap,
    Tool,
)
from benchmax.envs.base import BaseEnv, BaseRollout, JsonlDataset, resolve_dataset_path
from benchmax.envs.base.dataset import collect_dataset_problems
from benchmax.envs.base.env import check_env_definition, implements
from benchmax.envs.dataset import (
    Dataset,
    ListDataset,
    collector_paused,
    resolve_under,
    to_example,
    validate_max_examples,
)
from benchmax.envs.environment import Environment, check_group
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.shared_types import (
    Example,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
    ValidationDiagnostic,
)

__all__ = [
    "CHAT_ROLES",
    "ENTRY_POINT_GROUP",
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
    "EnvDefinitionError",
    "EnvSpec",
    "EnvSpecError",
    "Environment",
    "Example",
    "ExampleStream",
    "HFDataset",
    "HoldClock",
    "InjectedAuth",
    "InstalledEnv",
    "JsonRow",
    "JsonlDataset",
    "ListDataset",
    "LogEntry",
    "Message",
    "Messages",
    "ModelAuth",
    "ModelRequestContext",
    "RemoteDataset",
    "RemoteEnv",
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
    "Usage",
    "ValidationDiagnostic",
    "bind_model_auth",
    "canonical_example_id",
    "check_env_definition",
    "check_group",
    "check_prompt_messages",
    "collect_dataset_problems",
    "collect_examples",
    "collector_paused",
    "completion_text",
    "content_text",
    "current_scope",
    "data_directories",
    "data_directory",
    "enter_scope",
    "example_location",
    "group_scope",
    "implements",
    "installed_envs",
    "is_content_part",
    "is_remote_spec",
    "is_scorable",
    "is_scored",
    "load_env",
    "locate_dataset",
    "open_dataset",
    "open_examples",
    "register_engine",
    "resolve_dataset_path",
    "resolve_under",
    "rollout_scope",
    "settle_termination_reason",
    "to_example",
    "tool_error_ids",
    "tool_message",
    "validate_max_examples",
    "wire",
]
