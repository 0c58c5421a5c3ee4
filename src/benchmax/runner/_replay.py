"""Which reward parts of a run only a replay of its episodes could compute again.

An env that drives its turns (``env_response``) gives turn rewards from the state its
episode built; ``benchmax rescore`` has only the stored transcript, so it keeps those as
stored, and refuses outright where the env's outcome may read that state too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmax.envs import Environment, replay_only
from benchmax.errors import BenchmaxError
from benchmax.mix import EnvMix


class RescoreRefused(BenchmaxError, ValueError):
    """A run whose rewards a rescore cannot recompute from its stored transcripts."""


def replay_parts(env: Environment[Any, Any]) -> dict[str, list[str]]:
    """``{env name: parts}`` for an env, or for each member of a mixture; envs with none are left out."""
    if isinstance(env, EnvMix):
        found = {member.name: list(replay_only(member.env)) for member in env.members}
    else:
        found = {type(env).__name__: list(replay_only(env))}
    return {name: parts for name, parts in found.items() if parts}


def refuse_stale_outcomes(parts: Mapping[str, list[str]], source: object) -> None:
    """Raise :class:`RescoreRefused` when an env's outcome needs a replay: a rescore would score stale state."""
    stale = sorted(name for name, kinds in parts.items() if "outcome" in kinds)
    if stale:
        names = ", ".join(stale)
        raise RescoreRefused(
            f"{names} drives its turns (env_response), so its rewards may read state its episodes built, which "
            f"only a replay rebuilds: rescoring {source} from its transcripts would give stale numbers. Run it "
            "again (benchmax eval), or, if compute_reward/compute_group_rewards read only the transcript, its "
            f"turn records and the example, set outcome_from_transcript = True on {names} (docs/env-turns.md)"
        )
