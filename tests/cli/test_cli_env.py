"""``benchmax validate`` and ``benchmax init`` in real subprocesses."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from runkit import GOOD_LINE, cli_env, run_cli, write_checked_env

BAD_TOOL = '[{"type": "function", "function": {"name": "add", "parameters": {"type": "array"}}}]'


def test_validate_prints_every_problem_with_its_location_and_exits_1(tmp_path):
    env_file = write_checked_env(
        tmp_path / "env", tools=BAD_TOOL, splits={"train": '{"answer": 1}\n', "eval": GOOD_LINE + "\n{oops\n"}
    )
    where = f"{env_file.resolve()}:CheckedEnv"
    data = env_file.resolve().parent

    result = run_cli("validate", tmp_path / "env")

    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert errors[0] == (
        f"error: {where}.list_tools: CheckedEnv.list_tools()[0] ('add'): function.parameters must describe an "
        "object (type: object)"
    )
    assert errors[1].startswith(f"error: {where}.create_dataset('train'): {data / 'train.jsonl'}:1: the payload needs")
    assert errors[2].startswith(f"error: {where}.create_dataset('eval'): {data / 'eval.jsonl'}:2: invalid JSON")
    assert len(errors) == 3
    assert "3 problems found" in result.stdout


def test_an_env_that_does_not_load_exits_2_from_validate_as_from_eval(tmp_path):
    env_file = write_checked_env(tmp_path / "env", prelude="\n\nraise RuntimeError('half-written env')")

    result = run_cli("validate", tmp_path / "env")
    evaluated = run_cli("eval", tmp_path / "env", "--run-dir", tmp_path / "run", "--no-progress")

    assert (result.returncode, evaluated.returncode) == (2, 2)
    assert f"{env_file}:4: importing it raised RuntimeError: half-written env" in result.stdout
    assert f"{env_file}:4: importing it raised RuntimeError: half-written env" in evaluated.stdout
    assert not (tmp_path / "run").exists()


def test_validate_reports_a_missing_scoring_hook_and_a_missing_data_file(tmp_path):
    write_checked_env(tmp_path / "no_hook", reward=False)
    write_checked_env(tmp_path / "no_data", splits={"train": GOOD_LINE + "\n"})

    no_hook = run_cli("validate", tmp_path / "no_hook")
    no_data = run_cli("validate", tmp_path / "no_data")

    assert (no_hook.returncode, no_data.returncode) == (1, 1)
    assert "implements neither compute_reward nor compute_group_rewards" in no_hook.stdout
    assert f"{(tmp_path / 'no_data').resolve() / 'eval.jsonl'}: dataset file not found" in no_data.stdout


def test_validate_with_a_model_runs_one_group(tmp_path, server):
    write_checked_env(tmp_path / "env")

    result = run_cli("validate", tmp_path / "env", "--base-url", server.base_url, "--model", "scripted")

    assert result.returncode == 0, result.stdout
    assert "validate#1: finished, rewards {'ok': 1.0}" in result.stdout
    assert server.counts["requests"] == 2


def test_init_scaffolds_an_env_that_validates_and_passes_its_own_test(tmp_path):
    created = run_cli("init", "capitals-quiz", cwd=tmp_path)
    assert created.returncode == 0, created.stdout
    target = tmp_path / "capitals-quiz"
    assert sorted(path.name for path in target.iterdir()) == [
        "README.md", "env.py", "eval.jsonl", "test_env.py", "train.jsonl"
    ]  # fmt: skip

    validated = run_cli("validate", "capitals-quiz", cwd=tmp_path)
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_env.py"],
        cwd=target, env=cli_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert validated.returncode == 0, validated.stdout
    assert "loaded" in validated.stdout and "CapitalsQuizEnv" in validated.stdout
    assert validated.stdout.rstrip().endswith("valid")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout


def test_the_next_step_init_prints_runs_as_printed_in_a_shell_and_passes(tmp_path):
    # as a user types it after README command 1: `benchmax` and `python` are the install's own
    bin = tmp_path / "bin"
    bin.mkdir()
    (bin / "python").symlink_to(sys.executable)
    (bin / "benchmax").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m benchmax.cli "$@"\n')
    (bin / "benchmax").chmod(0o755)
    env = cli_env(PATH=f"{bin}{os.pathsep}{os.environ.get('PATH', '')}")
    work = tmp_path / "work"
    work.mkdir()

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False
        )

    created = shell("benchmax init myenv")
    assert created.returncode == 0, created.stdout + created.stderr
    (instruction,) = [line for line in created.stdout.splitlines() if line.startswith("next: ")]
    command = instruction.removeprefix("next: ")
    assert command == "benchmax validate myenv && python -m pytest myenv"

    ran = shell(command)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"\b1 passed\b", ran.stdout.splitlines()[-1]), ran.stdout
    readme = (work / "myenv" / "README.md").read_text()
    assert "    python -m pytest myenv\n" in readme, "the scaffold's README says the same"


def test_init_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")

    result = run_cli("init", "taken", cwd=tmp_path)

    assert result.returncode == 1
    assert "taken exists and is not empty; pick a new name" in result.stdout
    assert sorted(path.name for path in (tmp_path / "taken").iterdir()) == ["notes.txt"]


def test_validate_counts_in_words_that_agree_with_the_number(tmp_path):
    write_checked_env(tmp_path / "env", tools='[{"type": "function", "function": {"name": "add"}}]')

    result = run_cli("validate", tmp_path / "env")

    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert "ok 1 tool: add" in lines
    assert "ok eval: 1 example checked" in lines
    assert "ok eval: reward hooks ran on 1 synthetic rollout" in lines
    assert "(s)" not in result.stdout
