"""One training step as a person reads it: rewards per component, dead groups, IS ratio, KL, time.

TRL logs a dict of some forty figures per step; the line printed here holds
what says whether RL is working. Every figure also stays in ``metrics.jsonl``
and in the run store (``RunSession.record_step``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchmax.train._envs import EnvEval, EnvStep, envs_from_logs

if TYPE_CHECKING:
    from benchmax.train._eval import EvalSummary


@dataclass(frozen=True, slots=True)
class StepReport:
    """The figures of one optimisation step.

    ``components`` are the mean of every rollout the step generated (dropped
    dead groups included: how the policy does), ``None`` for a component the
    step has no value of (its column stays, so the rows stay aligned under one
    header); ``reward`` is the weighted mean of the rollouts trained on (TRL's
    ``reward``). In a mixture ``envs`` holds each env's figures and ``env_names``
    every env of the run, so a step that drew no group of one env keeps its column.
    """

    step: int
    max_steps: int | None
    reward: float | None
    components: Mapping[str, float | None] = field(default_factory=dict)
    dead: int | None = None
    drawn: int | None = None
    is_mean: float | None = None
    is_min: float | None = None
    is_max: float | None = None
    kl: float | None = None
    kl_name: str = "kl/sampler"
    staleness: float | None = None
    mismatches: int = 0
    seconds: float | None = None
    envs: tuple[EnvStep, ...] = ()
    env_names: tuple[str, ...] = ()
    set_aside: int | None = None
    """Examples the curriculum holds back (``--curriculum filter``); ``None``: no such curriculum."""
    level: float | None = None
    """The curriculum's difficulty level (``--curriculum levels``; a mixture's mean over its envs)."""

    def cells(self) -> dict[str, str]:
        """Column name -> text, in display order."""
        cells = {"step": f"{self.step}" + (f"/{self.max_steps}" if self.max_steps else "")}
        cells["reward"] = _number(self.reward)
        for name, value in self.components.items():
            cells[name] = _number(value)
        cells["dead"] = f"{self.dead}/{self.drawn}" if self.dead is not None and self.drawn else "-"
        if self.set_aside is not None:
            cells["aside"] = str(self.set_aside)
        if self.level is not None:
            cells["level"] = f"{self.level:g}"
        by_name = {figures.env: figures for figures in self.envs}
        for name in self.env_names or tuple(by_name):
            figures = by_name.get(name)
            cells[f"{name} reward/dead"] = (
                "-" if figures is None else f"{_number(figures.reward)} {figures.groups_dead}/{figures.groups_drawn}"
            )
        if self.is_mean is None:
            cells["IS ratio"] = "-"
        else:
            cells["IS ratio"] = f"{self.is_mean:.3f} ({_number(self.is_min)}-{_number(self.is_max)})"
        cells["KL" if self.kl_name == "kl" else "KL(sampler)"] = "-" if self.kl is None else f"{self.kl:.2e}"
        cells["stale"] = "-" if self.staleness is None else f"{self.staleness:g}"
        if self.mismatches:
            cells["tokens"] = f"{self.mismatches} mismatched"
        cells["seconds"] = _seconds(self.seconds)
        return cells

    def line(self) -> str:
        return "  ".join(f"{name} {value}" for name, value in self.cells().items())


def step_report(
    step: int,
    max_steps: int | None,
    logs: Mapping[str, Any],
    components: Sequence[str],
    *,
    envs: Sequence[str] = (),
) -> StepReport:
    """Build the report from the step's merged log (TRL's figures plus the bridge's);
    ``envs`` names a mixture's envs (their per-env figures are read from the log)."""

    def value(name: str) -> float | None:
        raw = logs.get(name)
        try:
            number = float(raw)
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None

    means: dict[str, float | None] = {}
    for name in components:
        mean = value(f"generated/{name}")
        means[name] = mean if mean is not None else value(f"rewards/{name}/mean")
    dead = value("groups/dead")
    drawn = value("groups/drawn")
    kl, kl_name = value("kl"), "kl"
    if kl is None:
        kl, kl_name = value("kl/sampler"), "kl/sampler"
    return StepReport(
        step=step,
        max_steps=max_steps,
        reward=value("reward"),
        components=means,
        dead=None if dead is None else int(dead),
        drawn=None if drawn is None else int(drawn),
        is_mean=value("is_ratio/mean"),
        is_min=value("is_ratio/min"),
        is_max=value("is_ratio/max"),
        kl=kl,
        kl_name=kl_name,
        staleness=value("policy/staleness_max"),
        mismatches=int(value("tokens/mismatch") or 0),
        seconds=value("step_time"),
        envs=envs_from_logs(logs),
        env_names=tuple(envs),
        set_aside=None if value("curriculum/set_aside") is None else int(value("curriculum/set_aside") or 0),
        level=value("curriculum/level"),
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _seconds(value: float | None) -> str:
    """A step's time to the digits that mean something.

    A fast step (a tiny model whose groups are all dead) takes a few
    hundredths of a second; "0.0" would read as if the step did nothing.
    """
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 0.1 or value == 0 else f"{value:.2g}"


def eval_table(before: EvalSummary, after: EvalSummary, *, steps: int) -> list[str]:
    """The held-out eval of a mixture, one table per env: its pass rate and each component,
    before training (step 0) and after (step ``steps``). ``[]`` for a run of one env."""
    start = {figures.env: figures for figures in before.envs}
    end = {figures.env: figures for figures in after.envs}
    lines = []
    for env in sorted(set(start) | set(end)):
        first, last = start.get(env), end.get(env)
        rollouts = (last or first).rollouts if (last or first) else 0
        lines.append(f"  env {env} ({rollouts} rollouts), step 0 -> step {steps}:")
        rows = [("pass rate", _rate(first), _rate(last))]
        names = sorted(set(first.means if first else {}) | set(last.means if last else {}))
        rows += [(name, _component(first, name), _component(last, name)) for name in names]
        width = max(len(name) for name, _, _ in rows)
        for name, was, now in rows:
            change = f" ({now - was:+.3f})" if was is not None and now is not None else ""
            lines.append(f"    {name.ljust(width)}  {_number(was)} -> {_number(now)}{change}")
    return lines


def _rate(figures: EnvEval | None) -> float | None:
    return None if figures is None else figures.pass_rate


def _component(figures: EnvEval | None, name: str) -> float | None:
    return None if figures is None else figures.means.get(name)
