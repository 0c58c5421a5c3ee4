"""A run of several envs in the CLI: the summary's suite table and ``benchmax diff``'s per-env rows,
each within 80 columns, and no component averaged across envs (#33.2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from runkit import cli_env, row, run_cli, write_split

from benchmax import open_run
from benchmax.cli._summary import render_summary
from benchmax.envs import Example, RolloutOutcome
from benchmax.store import GroupWrite, RunWriter

SUITE_SPEC = f"{Path(__file__).parents[1] / 'runner' / 'support' / 'suite_env.py'}:SuiteEnv"


def _rows(*, code_fails: bool) -> list[dict]:
    return [
        {**row("4", "math one"), "env": "math", "format": 1.0},
        {**row("5", "math two", answers=["6"]), "env": "math"},
        {**row("ok", "code one"), "env": "code"},
        {**row("ok", "code two", script=[{"status": 400}] if code_fails else None), "env": "code"},
    ]


def _cells(text: str) -> list[list[str]]:
    lines = [line.replace("┃", "│") for line in text.splitlines()]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.count("│") >= 3]


def _table_width(text: str) -> int:
    """The widest table line (paths and commands are printed unwrapped, whatever the width)."""
    return max(len(line) for line in text.splitlines() if line[:1] in "┏┃┡│└━┗╇┣┠├")


def _eval(tmp_path: Path, server, name: str, *, code_fails: bool):
    write_split(tmp_path / f"data-{name}", _rows(code_fails=code_fails))
    return run_cli(
        "eval", SUITE_SPEC, "--data-dir", tmp_path / f"data-{name}", "--base-url", server.base_url,
        "--model", "scripted", "--run-dir", tmp_path / name, "--no-progress", "--max-failure-rate", "1",
        env=cli_env(COLUMNS="80"),
    )  # fmt: skip


def test_eval_of_two_envs_prints_a_suite_table_in_80_columns(tmp_path, server):
    done = _eval(tmp_path, server, "a", code_fails=True)

    assert done.returncode == 0, done.stdout
    assert "per env (components after zero-fill, within each env)" in done.stdout
    assert "reward components (after zero-fill)" not in done.stdout  # its means would mix envs
    assert _table_width(done.stdout) <= 80
    cells = _cells(done.stdout)
    header = next(line for line in cells if line[:4] == ["env", "rollouts", "failed", "pass rate"])
    assert header[4:] == ["exact", "format", "tests_passed"]
    assert ["code", "2", "1", "50.0%", "-", "-", "0.5000"] in cells
    assert ["math", "2", "0", "50.0%", "0.5000", "0.5000", "-"] in cells


def test_a_suite_of_many_components_prints_one_row_per_env_and_figure_in_80_columns(tmp_path):
    writer = RunWriter.create(tmp_path / "wide", {"pass_threshold": 1.0})
    names = [f"component_{index}" for index in range(8)]
    writer.add_examples(
        "eval", [Example(f"{env}/1", {"prompt_messages": []}, env=env) for env in ("alpha", "beta")]
    )  # fmt: skip
    for index, env in enumerate(("alpha", "beta")):
        outcome = RolloutOutcome(
            rewards={name: 0.25 * index for name in names}, termination_reason="finished",
            rollout_id=f"eval/{env}/1#0", example_id=f"{env}/1", split="eval",
        )  # fmt: skip
        writer.write_group(GroupWrite(f"eval/{env}/1", f"{env}/1", index, 0, (outcome,), (0,)))
    writer.fill_batch(0)
    writer.close()
    console = Console(record=True, width=80, color_system=None)
    with open_run(tmp_path / "wide") as run:
        render_summary(console, run.stats())
    text = console.export_text()

    assert _table_width(text) <= 80
    cells = _cells(text)
    assert ["alpha", "rollouts (failed)", "1 (0)"] in cells and ["beta", "rollouts (failed)", "1 (0)"] in cells
    assert cells.count(["", "component_7", "0.2500"]) == 1 and cells.count(["", "component_7", "0.0000"]) == 1


@pytest.mark.parametrize("width", [80, 200])
def test_diff_of_two_suites_shows_per_env_rows(tmp_path, server, width):
    assert _eval(tmp_path, server, "a", code_fails=True).returncode == 0
    assert _eval(tmp_path, server, "b", code_fails=False).returncode == 0

    diffed = run_cli("diff", tmp_path / "a", tmp_path / "b", env=cli_env(COLUMNS=str(width)))

    assert diffed.returncode == 0, diffed.stdout
    assert "per env (B - A)" in diffed.stdout and "components (B - A)" not in diffed.stdout.replace("per env", "")
    assert _table_width(diffed.stdout) <= width
    cells = _cells(diffed.stdout)
    assert ["code", "pass rate", "0.5000", "1.0000", "+0.5000"] in cells
    assert ["", "tests_passed", "0.5000", "1.0000", "+0.5000"] in cells
    assert ["math", "pass rate", "0.5000", "0.5000", "+0.0000"] in cells
    assert ["", "exact", "0.5000", "0.5000", "+0.0000"] in cells
