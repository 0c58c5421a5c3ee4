"""The durable run store: one SQLite file per run directory, and the one read model of runs.

Write with :class:`RunWriter`; read records with :func:`open_run`; the run-level
figures every face shows (CLI summary, inspector, static export) are
:class:`RunStats` and the inspector's pages come from :class:`RunQueries`, so a
figure has one definition wherever it appears.
"""

from benchmax.store._codec import decode as decode_transcript
from benchmax.store._compare import Delta, RunDiff, compare, diff_runs
from benchmax.store._export import FORMATS, export_run, read_jsonl_export
from benchmax.store._figures import Bar, ComponentStats, ExamplePass, ReasonCount, RunStats, Spread
from benchmax.store._queries import MAX_PAGE, QUERY_SPEC, Page, RolloutFilter, RunQueries, match_query
from benchmax.store._reader import GroupRecord, RolloutRecord, Run, open_run
from benchmax.store._schema import DB_NAME, SCHEMA_VERSION, SchemaError
from benchmax.store._vocabulary import RUN_STATUSES, RunStatus, run_status
from benchmax.store._writer import MAX_QUEUED_ROLLOUTS, GroupWrite, RolloutScore, RunWriter, ScoredGroup, StoreError

__all__ = [
    "DB_NAME",
    "FORMATS",
    "MAX_PAGE",
    "MAX_QUEUED_ROLLOUTS",
    "QUERY_SPEC",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "Bar",
    "ComponentStats",
    "Delta",
    "ExamplePass",
    "GroupRecord",
    "GroupWrite",
    "Page",
    "ReasonCount",
    "RolloutFilter",
    "RolloutRecord",
    "RolloutScore",
    "Run",
    "RunDiff",
    "RunQueries",
    "RunStats",
    "RunStatus",
    "RunWriter",
    "SchemaError",
    "ScoredGroup",
    "Spread",
    "StoreError",
    "compare",
    "decode_transcript",
    "diff_runs",
    "export_run",
    "match_query",
    "open_run",
    "read_jsonl_export",
    "run_status",
]
