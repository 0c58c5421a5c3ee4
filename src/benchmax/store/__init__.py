"""The durable run store: one SQLite file per run directory, and the one read model of runs.

Write with :class:`RunWriter`; read records with :func:`open_run`; the run-level
figures every face shows (CLI summary, inspector, static export) are
:class:`RunStats` and the inspector's pages come from :class:`RunQueries`, so a
figure has one definition wherever it appears. So do a rollout's advantage
(:func:`group_spread`) and how an example reads in a list (:func:`prompt_excerpt`).
"""

from benchmax.store._advantage import GroupSpread, group_spread
from benchmax.store._batch import SQL_PARAMETERS, chunks
from benchmax.store._codec import decode as decode_transcript
from benchmax.store._compare import HEADLINE, Delta, RunDiff, compare, diff_runs, run_env
from benchmax.store._excerpt import EXCERPT_CHARS, MAX_IMAGE_URI_CHARS, content_line, prompt_excerpt
from benchmax.store._export import FORMATS, export_run, read_jsonl_export
from benchmax.store._figures import Bar, ComponentStats, ExamplePass, ReasonCount, Spread
from benchmax.store._ids import MIN_SHORT_ID, is_digest, short_ids
from benchmax.store._meta import ProvenanceResume, RunMeta
from benchmax.store._provenance import (
    CodeDigest,
    DataDigest,
    DataFile,
    EnvIdentity,
    GitState,
    Provenance,
    ProvenanceChange,
    provenance_changes,
)
from benchmax.store._queries import RunQueries
from benchmax.store._query_spec import MAX_PAGE, QUERY_SPEC, Page, RolloutFilter
from benchmax.store._reader import GroupRecord, RolloutRecord, Run, StoredGroup, decode_turns, open_run
from benchmax.store._run_stats import RunStats, Sample, TurnRewardStats
from benchmax.store._schema import DB_NAME, SCHEMA_VERSION, SchemaError
from benchmax.store._search import match_query
from benchmax.store._suite import EnvDelta, EnvFigures
from benchmax.store._vocabulary import RUN_STATUSES, RunStatus, run_status
from benchmax.store._writer import MAX_QUEUED_ROLLOUTS, RunWriter
from benchmax.store._writes import GroupWrite, RolloutCost, RolloutScore, ScoredGroup, StoreError

__all__ = [
    "DB_NAME",
    "EXCERPT_CHARS",
    "FORMATS",
    "HEADLINE",
    "MAX_IMAGE_URI_CHARS",
    "MAX_PAGE",
    "MAX_QUEUED_ROLLOUTS",
    "MIN_SHORT_ID",
    "QUERY_SPEC",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "SQL_PARAMETERS",
    "Bar",
    "CodeDigest",
    "ComponentStats",
    "DataDigest",
    "DataFile",
    "Delta",
    "EnvDelta",
    "EnvFigures",
    "EnvIdentity",
    "ExamplePass",
    "GitState",
    "GroupRecord",
    "GroupSpread",
    "GroupWrite",
    "Page",
    "Provenance",
    "ProvenanceChange",
    "ProvenanceResume",
    "ReasonCount",
    "RolloutCost",
    "RolloutFilter",
    "RolloutRecord",
    "RolloutScore",
    "Run",
    "RunDiff",
    "RunMeta",
    "RunQueries",
    "RunStats",
    "RunStatus",
    "RunWriter",
    "Sample",
    "SchemaError",
    "ScoredGroup",
    "Spread",
    "StoreError",
    "StoredGroup",
    "TurnRewardStats",
    "chunks",
    "compare",
    "content_line",
    "decode_transcript",
    "decode_turns",
    "diff_runs",
    "export_run",
    "group_spread",
    "is_digest",
    "match_query",
    "open_run",
    "prompt_excerpt",
    "provenance_changes",
    "read_jsonl_export",
    "run_env",
    "run_status",
    "short_ids",
]
