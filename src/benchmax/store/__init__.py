"""The durable run store: one SQLite file per run directory."""

from benchmax.store.reader import GroupRecord, RolloutRecord, Run, open_run
from benchmax.store.stats import ComponentStats, ExamplePass, RunStats
from benchmax.store.writer import GroupWrite, RunWriter, StoreError

__all__ = [
    "ComponentStats",
    "ExamplePass",
    "GroupRecord",
    "GroupWrite",
    "RolloutRecord",
    "Run",
    "RunStats",
    "RunWriter",
    "StoreError",
    "open_run",
]
