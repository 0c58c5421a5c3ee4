"""Training: GRPO on any benchmax environment, rollouts by benchmax's own engine.

Needs the ``train`` extra (``pip install 'benchmax[train]'``): torch, TRL,
transformers, datasets, accelerate, gguf and matplotlib. Imports are lazy, so
``benchmax.train.adapters`` and ``benchmax --help`` never pay for loading torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EventLoopThread": "benchmax.train.rollouts",
    "GenerationRecord": "benchmax.train.policy",
    "InProcessPolicy": "benchmax.train.policy",
    "POLICY_URL": "benchmax.train.trainer",
    "RolloutBatch": "benchmax.train.rollouts",
    "RolloutBridge": "benchmax.train.rollouts",
    "Session": "benchmax.train.trainer",
    "TemplateError": "benchmax.train.tokens",
    "TokenSequence": "benchmax.train.rollouts",
    "TokenState": "benchmax.train.policy",
    "TrainConfig": "benchmax.train.trainer",
    "TrainError": "benchmax.train.trainer",
    "TrainResult": "benchmax.train.trainer",
    "assemble": "benchmax.train.rollouts",
    "build": "benchmax.train.trainer",
    "component_reward": "benchmax.train.rewards",
    "parse_tool_calls": "benchmax.train.tokens",
    "render_prompt": "benchmax.train.tokens",
    "render_suffix": "benchmax.train.tokens",
    "run": "benchmax.train.trainer",
    "train": "benchmax.train.trainer",
    "zero_fill": "benchmax.train.rewards",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchmax.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
