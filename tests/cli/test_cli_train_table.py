"""The training step table as ``benchmax train`` prints it, at 80 and 120 columns."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from benchmax.cli._train import StepTable
from benchmax.train import StepReport
from benchmax.train._envs import EnvStep

ENVS = ("math", "format", "sql-with-a-long-name")


def _report(step: int) -> StepReport:
    return StepReport(
        step=step, max_steps=120, reward=0.4321, components={"correct": 0.5, "brevity": 0.1234, "exact": None},
        dead=3, drawn=16, is_mean=1.0123, is_min=0.5432, is_max=1.4567, kl=1.2e-3, staleness=1.0, seconds=12.5,
        envs=tuple(EnvStep(env=name, reward=0.25 * index, groups_dead=index, groups_drawn=5) for index, name in
                   enumerate(ENVS)),
        env_names=ENVS,
    )  # fmt: skip


@pytest.mark.parametrize("width", [80, 120])
def test_a_mixtures_step_rows_fold_to_the_terminal_and_keep_every_figure_whole(width: int) -> None:
    out = io.StringIO()
    table = StepTable(Console(file=out, width=width, highlight=False, soft_wrap=True, color_system=None))

    for step in (1, 2, 100):
        table(_report(step))

    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    per_step = len(table.lines)
    assert per_step > 1, "a mixture's row does not fit: it folds"
    text = out.getvalue()
    for name in ("math reward/dead", "sql-with-a-long-name reward/dead", "IS ratio", "seconds"):
        assert text.count(name) == 1, "the header once"
    assert text.count("1.012 (0.543-1.457)") == 3 and text.count("100/120") == 1
