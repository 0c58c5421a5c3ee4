"""Comparing two runs of the same examples: per component and per example reward deltas."""

from __future__ import annotations

from dataclasses import dataclass

from benchmax.store.reader import Run

HEADLINE = "reward"
"""The pseudo-component for each rollout's total reward."""


@dataclass(frozen=True, slots=True)
class Delta:
    component: str
    example_id: str | None
    mean_a: float | None
    mean_b: float | None
    count_a: int
    count_b: int

    @property
    def delta(self) -> float | None:
        if self.mean_a is None or self.mean_b is None:
            return None
        return self.mean_b - self.mean_a


@dataclass(frozen=True, slots=True)
class RunDiff:
    """B minus A. Examples present in one run only are listed, not compared."""

    components: tuple[Delta, ...]
    examples: tuple[Delta, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]


def _means(run: Run) -> dict[tuple[str, str], tuple[float, int]]:
    rows = run.sql(
        "SELECT r.example_id, w.component, AVG(w.value), COUNT(*) FROM rewards AS w "
        "JOIN rollouts AS r ON r.rollout_id = w.rollout_id GROUP BY r.example_id, w.component"
    )
    rows += run.sql(
        "SELECT example_id, ?, AVG(COALESCE(reward, 0)), COUNT(*) FROM rollouts GROUP BY example_id",
        (HEADLINE,),
    )
    return {(example, component): (mean, count) for example, component, mean, count in rows}


def diff_runs(a: Run, b: Run) -> RunDiff:
    means_a, means_b = _means(a), _means(b)
    examples_a = {example for example, _ in means_a}
    examples_b = {example for example, _ in means_b}
    shared = examples_a & examples_b
    components = sorted({c for _, c in means_a} | {c for _, c in means_b}, key=lambda c: (c != HEADLINE, c))
    per_example = []
    overall = []
    for component in components:
        sum_a = sum_b = 0.0
        n_a = n_b = 0
        for example in sorted(shared):
            mean_a, count_a = means_a.get((example, component), (None, 0))
            mean_b, count_b = means_b.get((example, component), (None, 0))
            per_example.append(Delta(component, example, mean_a, mean_b, count_a, count_b))
            if mean_a is not None:
                sum_a += mean_a * count_a
                n_a += count_a
            if mean_b is not None:
                sum_b += mean_b * count_b
                n_b += count_b
        overall.append(
            Delta(component, None, sum_a / n_a if n_a else None, sum_b / n_b if n_b else None, n_a, n_b)
        )
    return RunDiff(
        components=tuple(overall),
        examples=tuple(per_example),
        only_in_a=tuple(sorted(examples_a - examples_b)),
        only_in_b=tuple(sorted(examples_b - examples_a)),
    )
