"""What every trainer adapter needs: example rows, scalar rewards, refusing group rewards.

Trainers other than TRL want one float per rollout; benchmax envs emit a dict
of components. The rule is the same everywhere: the weighted sum of the
components, a missing component counting 0.0 (the batch zero-fill, with the
weight list standing in for the batch a single-rollout framework never shows
us), and an operational failure scoring nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from benchmax.envs import BaseEnv, Example, RolloutOutcome, implements

PAYLOAD_KEY = "benchmax_payload"
"""Row field holding the example payload as JSON text.

Text, not a nested mapping: Parquet and Arrow (which SkyRL and verifiers
datasets go through) would force one schema on payloads that differ per row.
"""
EXAMPLE_ID_KEY = "benchmax_example_id"


def example_fields(example: Example) -> dict[str, str]:
    """The two row fields an adapter needs to rebuild ``example`` on the other side."""
    return {EXAMPLE_ID_KEY: example.id, PAYLOAD_KEY: orjson.dumps(dict(example.payload)).decode()}


def example_from_fields(fields: Mapping[str, Any], *, where: str) -> Example:
    """Rebuild the example :func:`example_fields` wrote, naming ``where`` when a field is missing."""
    missing = [key for key in (EXAMPLE_ID_KEY, PAYLOAD_KEY) if key not in fields]
    if missing:
        raise ValueError(
            f"{where} has no {' or '.join(missing)}: build the dataset rows with benchmax's "
            "adapter helpers (to_skyrl_row, BenchmaxTaskset, ...) so each row carries its example"
        )
    payload = fields[PAYLOAD_KEY]
    if isinstance(payload, str | bytes):
        payload = orjson.loads(payload)
    if not isinstance(payload, Mapping) or "prompt_messages" not in payload:
        raise ValueError(f"{where}: {PAYLOAD_KEY} must be an example payload with prompt_messages")
    return Example(str(fields[EXAMPLE_ID_KEY]), dict(payload))


def rollout_id(prefix: str, example: Example) -> str:
    return f"{prefix}-{example.id}-{uuid.uuid4().hex[:12]}"


def components(outcome: RolloutOutcome, weights: Mapping[str, float]) -> dict[str, float]:
    """The outcome's components plus 0.0 for every weighted one it did not emit.

    Empty for an operational failure: it has no score to fill.
    """
    if not outcome.scored:
        return {}
    return {**{name: 0.0 for name in weights}, **{name: float(value) for name, value in outcome.rewards.items()}}


def scalar_reward(rewards: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Weighted sum; components without a weight count with weight 1.0."""
    return float(sum(float(value) * weights.get(name, 1.0) for name, value in rewards.items()))


def refuse_group_rewards(env: BaseEnv, framework: str) -> None:
    """Fail early where a framework scores each rollout alone.

    A group hook run over a group of one would return a silently wrong score
    (a win-rate against nobody), so the adapter refuses instead.
    """
    if implements(env, "compute_group_rewards"):
        raise ValueError(
            f"{type(env).__name__} implements compute_group_rewards, but {framework} scores each "
            "rollout on its own, so the group hook would see groups of one. Train it with "
            "`benchmax train` (TRL) or the ART adapter, which run whole sibling groups."
        )
