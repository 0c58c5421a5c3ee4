"""``benchmax validate A B`` / ``validate --env ...``: every env of a mixture checked as it would be alone.

Each member is validated by :func:`validate_env` with its own spec, kwargs and data
directory (so its hooks, its tools and its per-rollout ``tools_for`` sets are checked
over its own examples), and its report is kept under its name: a problem is always
one env's.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmax.loading import EnvSpec
from benchmax.mix import MixSpec
from benchmax.runner._validate import Report, validate_env


@dataclass(frozen=True, slots=True)
class MemberReport:
    """One env of a mixture and what validating it found."""

    name: str
    spec: str
    report: Report


async def validate_mix(
    mix: MixSpec,
    *,
    max_examples: int = 5,
    base_url: str | None = None,
    model: str = "default",
    api_key_env: str | None = None,
    call_tools: bool = True,
) -> tuple[MemberReport, ...]:
    """Each member's report, in the mixture's order (one failing member does not stop the others)."""
    reports: list[MemberReport] = []
    for member in mix.members:
        report = await validate_env(
            EnvSpec(member.spec, dict(member.env_kwargs)),
            data_dir=member.data_dir,
            max_examples=max_examples,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            call_tools=call_tools,
        )
        reports.append(MemberReport(member.name, member.spec, report))
    return tuple(reports)
