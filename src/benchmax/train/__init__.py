"""Training: GRPO on any benchmax environment, rollouts by benchmax's own engine.

Needs the ``train`` extra (``pip install 'benchmax[train]'``): torch, TRL,
transformers, datasets, accelerate, gguf and matplotlib. Imports are lazy, so
``benchmax.train.adapters`` and ``benchmax --help`` never pay for loading torch.

``train(env, model=..., ...)`` runs a whole training; ``build`` then ``run``
split it, so a caller can reach the trainer (``TrainingSession.trainer``) first.
``Sampler`` and its built-ins (``--curriculum``) decide what each group runs.
``benchmax.train.tiny`` builds tiny local models for tests; trainer adapters
(verl, SkyRL, verifiers, ART) live in ``benchmax.train.adapters``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CurriculumError": "benchmax.train._curriculum",
    "DifficultyFilter": "benchmax.train._samplers",
    "ExamplePool": "benchmax.train._curriculum",
    "GroupScore": "benchmax.train._curriculum",
    "Levels": "benchmax.train._samplers",
    "PassRateWeights": "benchmax.train._samplers",
    "Sampler": "benchmax.train._curriculum",
    "Uniform": "benchmax.train._samplers",
    "parse_curriculum": "benchmax.train._samplers",
    "EnvEval": "benchmax.train._envs",
    "EnvStep": "benchmax.train._envs",
    "EvalSummary": "benchmax.train._eval",
    "POLICY_URL": "benchmax.train._eval",
    "StepReport": "benchmax.train._report",
    "eval_policy": "benchmax.train._eval",
    "eval_table": "benchmax.train._report",
    "load_policy_model": "benchmax.train._model",
    "TrainConfig": "benchmax.train._config",
    "TrainError": "benchmax.train._config",
    "TrainResult": "benchmax.train._config",
    "TrainingSession": "benchmax.train._trainer",
    "build": "benchmax.train._trainer",
    "run": "benchmax.train._trainer",
    "train": "benchmax.train._trainer",
}

__all__ = [
    "POLICY_URL",
    "CurriculumError",
    "DifficultyFilter",
    "EnvEval",
    "EnvStep",
    "EvalSummary",
    "ExamplePool",
    "GroupScore",
    "Levels",
    "PassRateWeights",
    "Sampler",
    "StepReport",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "TrainingSession",
    "Uniform",
    "build",
    "eval_policy",
    "eval_table",
    "load_policy_model",
    "parse_curriculum",
    "run",
    "train",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchmax.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
