"""``BaseEnv`` and what it is built from, at benchmax 0.2.x's import path ``benchmax.envs.base``."""

from benchmax.envs.base import openai_types
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.base.openai_types import Message, Messages, Tool
from benchmax.envs.dataset import JsonlDataset, JsonRow, resolve_dataset_path

__all__ = [
    "BaseEnv",
    "BaseRollout",
    "JsonRow",
    "JsonlDataset",
    "Message",
    "Messages",
    "Tool",
    "openai_types",
    "resolve_dataset_path",
]
