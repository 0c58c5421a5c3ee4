"""Training: GRPO on any benchmax environment, rollouts by benchmax's own engine.

Needs the ``train`` extra (``pip install 'benchmax[train]'``): torch, TRL,
transformers, datasets, accelerate, gguf and matplotlib.
"""

from benchmax.train.policy import GenerationRecord, InProcessPolicy, TokenState
from benchmax.train.rewards import component_reward, zero_fill
from benchmax.train.rollouts import EventLoopThread, RolloutBatch, RolloutBridge, TokenSequence, assemble
from benchmax.train.tokens import TemplateError, parse_tool_calls, render_prompt, render_suffix
from benchmax.train.trainer import (
    POLICY_URL,
    Session,
    TrainConfig,
    TrainError,
    TrainResult,
    build,
    run,
    train,
)

__all__ = [
    "POLICY_URL",
    "EventLoopThread",
    "GenerationRecord",
    "InProcessPolicy",
    "RolloutBatch",
    "RolloutBridge",
    "Session",
    "TemplateError",
    "TokenSequence",
    "TokenState",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "assemble",
    "build",
    "component_reward",
    "parse_tool_calls",
    "render_prompt",
    "render_suffix",
    "run",
    "train",
    "zero_fill",
]
