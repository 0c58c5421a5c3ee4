"""``benchmax diff`` at 80 and 120 columns: ids short, numbers whole, the prompt gives way."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from runkit import cli_env, run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

LONG = "a prompt far longer than any terminal is wide, " * 4
NUMBER = re.compile(r"^[+-]?\d+\.\d{4}$")


def _long_prompts(env_dir: Path) -> None:
    lines = []
    for line in (env_dir / "eval.jsonl").read_text().splitlines():
        payload = json.loads(line)
        payload["prompt_messages"][0]["content"] = LONG + payload["prompt_messages"][0]["content"]
        lines.append(json.dumps(payload))
    (env_dir / "eval.jsonl").write_text("\n".join(lines) + "\n")


def _more_components(env_dir: Path) -> None:
    """The rescored reward: `correct` doubled and two new components with long names."""
    code = (env_dir / "env.py").read_text()
    old = 'return {"correct": float(text.strip() == rollout.example_args["answer"])}'
    assert old in code
    new = (
        'right = float(text.strip() == rollout.example_args["answer"])\n'
        '        return {"correct": 2.0 * right, "a_rather_long_component_name": 0.5 * right,'
        ' "another_long_component_name": 0.25}'
    )
    (env_dir / "env.py").write_text(code.replace(old, new))


@pytest.mark.parametrize("columns", [80, 120])
def test_diff_of_a_mixture_keeps_short_ids_and_whole_numbers_and_cuts_only_the_prompt(tmp_path, server, columns):
    envs = [write_env(tmp_path / "envs", name, rows=2) for name in ("alpha", "beta")]
    for env_dir in envs:
        _long_prompts(env_dir)
    run_a = tmp_path / "a"
    first = run_cli("eval", *envs, "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_a,
                    "--no-progress")  # fmt: skip
    assert first.returncode == 0, first.stdout
    _more_components(envs[0])
    rescored = run_cli("rescore", run_a, "--run-dir", tmp_path / "b")
    assert rescored.returncode == 0, rescored.stdout

    diffed = run_cli("diff", run_a, tmp_path / "b", env=cli_env(COLUMNS=str(columns)))

    assert diffed.returncode == 0, diffed.stdout
    lines = diffed.stdout.splitlines()
    tables = [line for line in lines if line[:1] in "┏┃┡│├└"]
    assert max(len(line) for line in tables) <= columns, diffed.stdout
    start = next(index for index, line in enumerate(lines) if line.startswith("examples with the largest changes"))
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines[start:] if line.startswith("│ ")]
    firsts = [cells for cells in rows if cells[0]]
    assert len(firsts) == 2, diffed.stdout  # alpha's two examples changed, beta's did not
    for cells in firsts:
        assert re.fullmatch(r"alpha/[0-9a-f]{8}", cells[0]), diffed.stdout
        assert all(NUMBER.match(cell) for cell in cells[1:4]), diffed.stdout
    assert "…" not in "".join(cell for cells in rows for cell in cells[:4])
    header = next(line for line in lines[start:] if line.startswith("┃"))
    if columns >= 120:
        assert "prompt" in header and all(cells[-1].startswith("a prompt far") for cells in firsts), diffed.stdout
    if "prompt" not in header:
        assert f"prompt left out: the terminal is {columns} columns wide" in diffed.stdout
