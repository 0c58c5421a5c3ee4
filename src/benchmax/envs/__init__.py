"""The environment contract: what env authors write and trainers call."""

from benchmax.envs.base_env import BaseEnv
from benchmax.envs.dataset import Dataset, JsonlDataset, ListDataset, resolve_under
from benchmax.envs.environment import Environment
from benchmax.envs.errors import DatasetError, EnvDefinitionError, RolloutFailure, ToolError
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.rollout import (
    BaseRollout,
    LogEntry,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    StaticBearerAuth,
    TurnRecord,
    Usage,
)
from benchmax.envs.termination import TerminationReason
from benchmax.envs.types import DatasetSplit, Example, Message, Messages, RewardMap, Tool

__all__ = [
    "BaseEnv",
    "BaseRollout",
    "Dataset",
    "DatasetError",
    "DatasetSplit",
    "EnvDefinitionError",
    "Environment",
    "Example",
    "JsonlDataset",
    "ListDataset",
    "LogEntry",
    "Message",
    "Messages",
    "RewardMap",
    "RolloutFailure",
    "RolloutOutcome",
    "RolloutRequest",
    "SamplingParams",
    "StaticBearerAuth",
    "TerminationReason",
    "Tool",
    "ToolError",
    "TurnRecord",
    "Usage",
    "canonical_example_id",
    "resolve_under",
]
