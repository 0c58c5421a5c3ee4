"""What the inspector's tables can be filtered and sorted by, declared once.

The SQL of the tables (``_tables``) is built from :data:`QUERY_SPEC`, and the
inspector's static export hands the same declaration to the browser, which applies
it to the rows the export carries. A parameter the server understands is one the
export understands, with the same meaning. Sort keys and filters come from URLs, so
they are mapped onto the fixed SQL expressions here and bound parameters, never
spliced into SQL text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmax.store._schema import example_env

MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class Page:
    """One page of rows and the number of rows the filter matched in all."""

    rows: list[dict[str, Any]]
    total: int
    offset: int
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "total": self.total, "offset": self.offset, "limit": self.limit}


@dataclass(frozen=True, slots=True)
class RolloutFilter:
    """What the run page's rollout table may be narrowed by (see :data:`QUERY_SPEC`).

    ``component`` with ``low``/``high`` keeps rollouts whose value of that
    component lies in ``[low, high]``; ``text`` matches words of the final answer,
    the error and the ids (and of the whole transcript with ``in_transcript``):
    each word of ``text`` must start a word there, in any order.
    """

    reasons: tuple[str, ...] = ()
    example_id: str | None = None
    group_id: str | None = None
    component: str | None = None
    low: float | None = None
    high: float | None = None
    text: str | None = None
    in_transcript: bool = False
    failed: bool | None = None
    step: int | None = None
    """A training run's step (the rollouts that step generated)."""
    env: str | None = None
    """The env of the rollouts kept (a mixture's member; a run of one env names its own)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any], getlist: Callable[[str], list[str]] | None = None) -> RolloutFilter:
        """The filter a URL's query parameters ask for (names as in :data:`QUERY_SPEC`)."""
        reasons = getlist("reason") if getlist else [params.get("reason") or ""]
        return cls(
            reasons=tuple(value for value in reasons if value),
            example_id=params.get("example") or None,
            group_id=params.get("group") or None,
            component=params.get("c") or None,
            low=_number(params.get("cmin"), "cmin"),
            high=_number(params.get("cmax"), "cmax"),
            text=params.get("q") or None,
            in_transcript=params.get("transcript") == "1",
            failed={"1": True, "0": False}.get(params.get("failed") or ""),
            step=_step(params.get("step")),
            env=params.get("env") or None,
        )


_ROLLOUT_SORTS = (
    "seq", "rollout_id", "example_id", "group_id", "sample_index", "termination_reason", "reward",
    "prompt_tokens", "completion_tokens", "num_turns", "num_tool_calls", "seconds", "started_at", "final_text",
)  # fmt: skip

# The one declaration of the tables' parameters. Sorts are lists of row fields,
# compared in order; ``null`` values sort last either way; ties end on the tiebreak.
QUERY_SPEC: dict[str, Any] = {
    "rollouts": {
        "default_sort": "seq",
        "tiebreak": "seq",
        "sorts": {**{name: [name] for name in _ROLLOUT_SORTS}, "env": ["env"]},
        "component_sort": "c:",
        "filters": [
            {"param": "reason", "op": "in", "field": "termination_reason"},
            {"param": "example", "op": "eq", "field": "example_id"},
            {"param": "group", "op": "eq", "field": "group_id"},
            {"param": "failed", "op": "flag", "field": "scored", "true_means": False},
            {"param": "step", "op": "number", "field": "step"},
            {"param": "env", "op": "eq", "field": "env"},
            {"param": "c", "op": "component_range", "low": "cmin", "high": "cmax"},
            {
                "param": "q",
                "op": "words",
                "fields": ["final_text", "error", "rollout_id", "example_id"],
                "transcript_param": "transcript",
            },
        ],
    },
    "examples": {
        "default_sort": "idx",
        "tiebreak": "example_id",
        "sorts": {
            "idx": ["idx"],
            "example_id": ["example_id"],
            "rollouts": ["rollouts"],
            "passed": ["passed"],
            "pass_rate": ["pass_rate"],
            "mean_reward": ["mean_reward"],
            "groups": ["groups"],
            "failed": ["failed"],
            "env": ["env", "idx"],
        },
        "filters": [
            {"param": "q", "op": "contains", "fields": ["example_id"]},
            {"param": "env", "op": "eq", "field": "env"},
        ],
    },
    "groups": {
        "default_sort": "order",
        "tiebreak": "group_id",
        "sorts": {
            "order": ["example_idx", "step", "group_id"],
            "group_id": ["group_id"],
            "example_id": ["example_id"],
            "batch": ["batch"],
            "size": ["size"],
            "mean": ["mean"],
            "std": ["std"],
            "low": ["low"],
            "high": ["high"],
            "failed": ["failed"],
            "env": ["env", "example_idx", "step", "group_id"],
        },
        "filters": [
            {"param": "no_signal", "op": "flag", "field": "no_signal", "true_means": True},
            {"param": "example", "op": "eq", "field": "example_id"},
            {"param": "env", "op": "eq", "field": "env"},
        ],
    },
}


# a row's env (example_env): NULL in a run of one env; sorts put NULL last (_NULLABLE) and filters
# compare it with the run's own env in its place, as QueryBase._label_envs names the rows
_ROLLOUT_SQL = {name: f"r.{name}" for name in _ROLLOUT_SORTS} | {"env": example_env("r")}
_EXAMPLE_SQL = {
    "idx": "f.idx",
    "example_id": "f.example_id",
    "rollouts": "f.rollouts",
    "passed": "f.passed",
    "pass_rate": "CAST(f.passed AS REAL) / f.rollouts",
    "mean_reward": "f.reward_sum / f.rollouts",
    "groups": "f.groups",
    "failed": "f.failed",
    "env": example_env("f"),
}
_EXAMPLE_TABLE_SQL = {"idx": "idx", "example_id": "example_id", "env": "env"}
"""The sorts the ``examples`` table answers alone (so examples without rollouts yet are listed too)."""
_GROUP_SQL = {
    "example_idx": "example_idx",
    "step": "step",
    "group_id": "group_id",
    "example_id": "example_id",
    "batch": "batch",
    "size": "size",
    "mean": "reward_sum / size",
    "std": "reward_sq / size - (reward_sum / size) * (reward_sum / size)",
    "low": "low",
    "high": "high",
    "failed": "failed",
    "env": example_env("groups"),
}
_NULLABLE = {"r.reward", "low", "high", "env", _ROLLOUT_SQL["env"], _EXAMPLE_SQL["env"], _GROUP_SQL["env"]}


def _number(value: Any, name: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _step(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        step = int(value)
    except (TypeError, ValueError):
        step = -1
    if step < 0:
        raise ValueError(f"step must be a whole number >= 0, got {value!r}")
    return step


def _bounds(offset: int, limit: int) -> tuple[int, int]:
    return max(0, int(offset)), max(1, min(MAX_PAGE, int(limit)))
