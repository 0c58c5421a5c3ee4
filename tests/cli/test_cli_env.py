"""``benchmax validate`` and ``benchmax init`` in real subprocesses."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
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
        f"error: {env_file.resolve()}:10: CheckedEnv.list_tools()[0] ('add'): function.parameters must describe an "
        "object (type: object)"
    )
    assert errors[1].startswith(f"error: {where}.create_dataset('train'): {data / 'train.jsonl'}:1: the payload needs")
    assert errors[2].startswith(f"error: {where}.create_dataset('eval'): {data / 'eval.jsonl'}:2: invalid JSON")
    assert len(errors) == 3
    assert "3 problems found" in result.stdout


def test_an_env_that_does_not_load_is_a_problem_for_validate_and_bad_input_for_eval(tmp_path):
    """validate exits 1 on any problem of the env (it found what it looks for); eval 2 (it could not run)."""
    env_file = write_checked_env(tmp_path / "env", prelude="\n\nraise RuntimeError('half-written env')")

    result = run_cli("validate", tmp_path / "env")
    evaluated = run_cli("eval", tmp_path / "env", "--run-dir", tmp_path / "run", "--no-progress")

    assert (result.returncode, evaluated.returncode) == (1, 2)
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


RAISING_TOOL = """
from benchmax.envs import BaseEnv, JsonlDataset


class ToolEnv(BaseEnv):
    max_turns = 2

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        parameters = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        return [{"type": "function", "function": {"name": "add", "parameters": parameters}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return args["b"] + 1

    async def compute_reward(self, rollout):
        return {"ok": 1.0}
"""


def _raising_tool(directory):
    directory.mkdir()
    (directory / "env.py").write_text(RAISING_TOOL)
    for split in ("train", "eval"):
        (directory / f"{split}.jsonl").write_text((GOOD_LINE + "\n") * 5)
    return (directory / "env.py").resolve(), 15


def _bad_reward(directory):
    env_file = write_checked_env(directory, splits={split: (GOOD_LINE + "\n") * 5 for split in ("train", "eval")})
    env_file.write_text(env_file.read_text().replace('{"ok": 1.0}', '{"ok": "yes"}'))
    return env_file.resolve(), 13


def _syntax_error(directory):
    return write_checked_env(directory, prelude="def broken(:").resolve(), 2


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: (write_checked_env(d, max_turns="None").resolve(), 5), "CheckedEnv.max_turns is not set"),
        (lambda d: (write_checked_env(d, tools=BAD_TOOL).resolve(), 10), "function.parameters must describe an object"),
        (_bad_reward, "compute_reward (train examples 0-4, eval examples 0-4): returned 'ok'='yes' (str)"),
        (_raising_tool, "ToolEnv.run_tool('add', a=0) raised KeyError: 'b' (at {file}:16); in a run this ends"),
        (_syntax_error, "importing it raised SyntaxError"),
    ],
    ids=["missing-max-turns", "invalid-tool-schema", "bad-reward", "run-tool-raises", "syntax-error"],
)
def test_validate_names_each_problem_once_at_its_file_and_line_and_exits_1(tmp_path, make, says):
    env_file, line = make(tmp_path / "env")

    result = run_cli("validate", tmp_path / "env")

    assert result.returncode == 1, result.stdout
    (error,) = [text for text in result.stdout.splitlines() if text.startswith("error: ")]
    assert f"{env_file}:{line}: " in error, error
    assert says.format(file=env_file) in error, error
    assert result.stdout.splitlines()[-1] == "1 problem found"


def test_validate_exits_2_on_a_wrong_command_line_only(tmp_path):
    write_checked_env(tmp_path / "env")

    bad_arg = run_cli("validate", tmp_path / "env", "--env-arg", "not-a-pair")
    unknown = run_cli("validate", tmp_path / "env", "--no-such-option")
    nothing = run_cli("validate", tmp_path / "no-such-env")
    valid = run_cli("validate", tmp_path / "env")

    assert [r.returncode for r in (bad_arg, unknown, nothing, valid)] == [2, 2, 2, 0], nothing.stdout + valid.stdout
    assert f"error: {tmp_path / 'no-such-env'}: " in nothing.stdout
