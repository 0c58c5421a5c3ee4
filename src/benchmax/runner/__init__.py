"""The runner: one run session for every face (eval, rescore, training) and the eval run itself.

Scheduling, batches, zero-fill, store writes, resume, status, and the verdict
behind the exit code; executors run the groups here or on Ray actors.
"""

from benchmax.runner._config import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_FAILURE_RATE,
    EMBEDDED,
    EXECUTORS,
    RunConfig,
    default_run_dir,
    env_name,
    target_fields,
)
from benchmax.runner._endpoint import MAX_RESTARTS, Endpoint, EndpointError, model_endpoint
from benchmax.runner._executor import GroupExecutor, LocalExecutor, RolloutSlots, SlotClaim, failed_group
from benchmax.runner._import import import_run, resolve_examples
from benchmax.runner._provenance import RunOrigin, run_provenance
from benchmax.runner._replay import RescoreRefused, replay_parts
from benchmax.runner._rescore import arescore
from benchmax.runner._run import RunObserver, RunResult, RunStopped, arun, evaluate, sampling_for
from benchmax.runner._session import GroupKey, RunKind, RunSession, group_keys
from benchmax.runner._validate import Problem, Report, validate_env
from benchmax.runner._validate_mix import MemberReport, validate_mix
from benchmax.runner._verdict import RunVerdict, judge_run
from benchmax.store import RunMeta  # the record RunSession.create takes; its home is the store

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_MAX_FAILURE_RATE",
    "EMBEDDED",
    "EXECUTORS",
    "MAX_RESTARTS",
    "Endpoint",
    "EndpointError",
    "GroupExecutor",
    "GroupKey",
    "LocalExecutor",
    "MemberReport",
    "Problem",
    "Report",
    "RescoreRefused",
    "RolloutSlots",
    "RunConfig",
    "RunKind",
    "RunMeta",
    "RunObserver",
    "RunOrigin",
    "RunResult",
    "RunSession",
    "RunStopped",
    "RunVerdict",
    "SlotClaim",
    "arescore",
    "arun",
    "default_run_dir",
    "env_name",
    "evaluate",
    "failed_group",
    "group_keys",
    "import_run",
    "judge_run",
    "model_endpoint",
    "replay_parts",
    "resolve_examples",
    "run_provenance",
    "sampling_for",
    "target_fields",
    "validate_env",
    "validate_mix",
]
