"""The durable run store: one SQLite file per run directory."""

from benchmax.store.diff import Delta, RunDiff, diff_runs
from benchmax.store.export import export_run, read_jsonl_export
from benchmax.store.reader import GroupRecord, RolloutRecord, Run, open_run
from benchmax.store.schema import RUN_STATUSES, RunStatus
from benchmax.store.stats import ComponentStats, ExamplePass, RunStats
from benchmax.store.writer import GroupWrite, RunWriter, StoreError

__all__ = [
    "RUN_STATUSES",
    "ComponentStats",
    "Delta",
    "ExamplePass",
    "GroupRecord",
    "GroupWrite",
    "RolloutRecord",
    "Run",
    "RunDiff",
    "RunStats",
    "RunStatus",
    "RunWriter",
    "StoreError",
    "diff_runs",
    "export_run",
    "open_run",
    "read_jsonl_export",
]
