"""The runner: scheduling, batches, zero-fill and store writes, for every face above it."""

from benchmax.runner.config import EMBEDDED, RunConfig
from benchmax.runner.env_spec import EnvSpec, EnvSpecError
from benchmax.runner.run import RunObserver, RunResult, arun, evaluate, group_id, rollout_id

__all__ = [
    "EMBEDDED",
    "EnvSpec",
    "EnvSpecError",
    "RunConfig",
    "RunObserver",
    "RunResult",
    "arun",
    "evaluate",
    "group_id",
    "rollout_id",
]
