"""``validate_env``: every problem of a broken env is reported with where it is."""

from __future__ import annotations

import json

import pytest
from runkit import GOOD_LINE, write_checked_env

from benchmax.loading import EnvSpec
from benchmax.runner import Report, validate_env

BAD_SCHEMA = '[{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integr"}}}}}]'  # noqa: E501


async def _validate(directory, **options) -> Report:
    return await validate_env(EnvSpec(str(directory)), **options)


def _lines(report: Report) -> list[str]:
    return [f"{problem.where}: {problem.message}" for problem in report.problems]


async def test_a_well_formed_env_has_no_problems_and_notes_what_was_checked(tmp_path):
    env_file = write_checked_env(tmp_path / "env")

    report = await _validate(tmp_path / "env")

    assert report.ok, _lines(report)
    assert f"loaded {env_file.resolve()}:CheckedEnv" in report.notes
    assert {"0 tools: none", "train: 1 example checked", "eval: 1 example checked"} <= set(report.notes)


async def test_an_import_error_is_reported_with_the_file_and_line(tmp_path):
    env_file = write_checked_env(tmp_path / "env", prelude="import no_such_module_for_benchmax_tests")

    report = await _validate(tmp_path / "env")

    assert [(p.where, p.message.split(":")[0:2]) for p in report.problems] == [
        (str(tmp_path / "env"), [str(env_file), "2"])
    ]
    assert "ModuleNotFoundError: No module named 'no_such_module_for_benchmax_tests'" in report.problems[0].message


@pytest.mark.parametrize(
    ("options", "message", "line"),
    [
        ({"reward": False}, "CheckedEnv implements neither compute_reward nor compute_group_rewards", 4),
        ({"max_turns": "0"}, "CheckedEnv.max_turns must be a positive int, got 0", 5),
        ({"max_turns": "None"}, "CheckedEnv.max_turns is not set", 5),
    ],
    ids=["no-scoring-hook", "zero-max-turns", "unset-max-turns"],
)
async def test_an_unusable_env_definition_is_reported_at_its_file_and_line(tmp_path, options, message, line):
    """At the attribute's line when the message names one, else at the ``class`` statement."""
    env_file = write_checked_env(tmp_path / "env", **options)

    report = await _validate(tmp_path / "env")

    assert len(report.problems) == 1
    assert report.problems[0].where == f"{env_file.resolve()}:{line}"
    assert message in report.problems[0].message


@pytest.mark.parametrize(
    ("split_text", "message"),
    [
        (GOOD_LINE + "\n{not json\n", "eval.jsonl:2: invalid JSON"),
        ('{"answer": "no prompt"}\n', "eval.jsonl:1: the payload needs a non-empty 'prompt_messages' list"),
        ('{"prompt_messages": []}\n', "eval.jsonl:1: the payload needs a non-empty 'prompt_messages' list"),
        ('["a list"]\n', "eval.jsonl:1: each line must be a JSON object, got list"),
        ("\n", "the split is empty"),
    ],
    ids=["invalid-json", "no-prompt-messages", "empty-prompt-messages", "not-an-object", "empty"],
)
async def test_a_bad_data_line_is_reported_with_its_file_and_line(tmp_path, split_text, message):
    env_file = write_checked_env(tmp_path / "env", splits={"train": GOOD_LINE + "\n", "eval": split_text})

    report = await _validate(tmp_path / "env")

    assert len(report.problems) == 1, _lines(report)
    assert report.problems[0].where == f"{env_file.resolve()}:CheckedEnv.create_dataset('eval')"
    assert message in report.problems[0].message
    if "jsonl:" in message:
        assert report.problems[0].message.startswith(str((tmp_path / "env").resolve() / "eval.jsonl"))


async def test_every_problem_of_an_env_is_reported_not_only_the_first(tmp_path):
    env_file = write_checked_env(tmp_path / "env", tools=BAD_SCHEMA, splits={"eval": GOOD_LINE + "\n[1,\n"})
    where = f"{env_file.resolve()}:CheckedEnv"

    report = await _validate(tmp_path / "env")

    tools, train, data = _lines(report)
    assert tools == (
        f"{env_file.resolve()}:10: CheckedEnv.list_tools()[0] ('add'): invalid JSON Schema in function.parameters at "
        "properties/a/type: 'integr' is not valid under any of the given schemas"
    )
    env_dir = tmp_path.resolve() / "env"
    assert train == (
        f"{where}.create_dataset('train'): CheckedEnv.create_dataset('train') found no data in any of the places "
        f"looked: {env_dir} ({env_dir / 'train.jsonl'}: dataset file not found); {env_dir / 'data'} (no such "
        "directory). Give the data directory with --data-dir DIR (base_dir of create_dataset)"
    )
    assert data.startswith(
        f"{where}.create_dataset('eval'): {tmp_path.resolve() / 'env' / 'eval.jsonl'}:2: invalid JSON ("
    )


async def test_a_tool_list_that_is_not_a_list_is_reported(tmp_path):
    write_checked_env(tmp_path / "env", tools='{"name": "add"}')

    report = await _validate(tmp_path / "env")

    assert [p.message for p in report.problems] == ["CheckedEnv.list_tools() must return a list, got dict"]


async def test_with_a_model_one_group_runs_and_its_rewards_are_noted(tmp_path, server):
    write_checked_env(tmp_path / "env")

    report = await _validate(tmp_path / "env", base_url=server.base_url, model="scripted")

    assert report.ok, _lines(report)
    assert server.counts["requests"] == 2
    assert "validate#0: finished, rewards {'ok': 1.0}" in report.notes


async def test_with_a_failing_model_each_rollout_failure_is_a_problem(tmp_path, server):
    line = '{"prompt_messages": [{"role": "user", "content": "hi\\n#script: [{\\"status\\": 400}]"}]}\n'
    write_checked_env(tmp_path / "env", splits={"train": line, "eval": line})

    report = await _validate(tmp_path / "env", base_url=server.base_url, model="scripted")

    assert [p.where.rsplit(" ", 1)[1] for p in report.problems] == ["validate#0", "validate#1"]
    assert all(p.message.startswith("model_error: ") for p in report.problems)


BUDGET_REWARD = """
class BudgetEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "stepped"

    async def compute_reward(self, rollout):
        if rollout.termination_reason == "max_turns_exceeded":
            raise KeyError("answer")
        return {"ok": 1.0}
"""


async def test_with_a_model_a_budget_stop_whose_reward_failed_is_a_problem(tmp_path, server):
    script = json.dumps([{"tool_calls": [{"name": "step"}]}])
    line = json.dumps({"prompt_messages": [{"role": "user", "content": f"hi\n#script: {script}"}]}) + "\n"
    _env(tmp_path / "env", BUDGET_REWARD, {"train": line, "eval": line})

    report = await _validate(tmp_path / "env", base_url=server.base_url, model="scripted")

    assert [p.where.rsplit(" ", 1)[1] for p in report.problems] == ["validate#0", "validate#1"], report.notes
    assert all(p.message == "max_turns_exceeded: compute_reward raised KeyError: 'answer'" for p in report.problems), (
        _lines(report)
    )


def _env(directory, body: str, lines: dict[str, str] | None = None):
    """An env file of this test's own, with data files (default: one good line per split)."""
    directory.mkdir(parents=True, exist_ok=True)
    header = "from contextlib import asynccontextmanager\nfrom benchmax.envs import BaseEnv, JsonlDataset\n\n\n"
    (directory / "env.py").write_text(header + body)
    for split, text in (lines or {"train": GOOD_LINE + "\n", "eval": GOOD_LINE + "\n"}).items():
        (directory / f"{split}.jsonl").write_text(text)
    return (directory / "env.py").resolve()


DATA = """
class NewcomerEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)
"""


async def test_a_reward_written_without_async_is_found_with_its_line(tmp_path):
    env_file = _env(tmp_path / "env", DATA + "\n    def compute_reward(self, rollout):\n        return {'ok': 1.0}\n")

    report = await _validate(tmp_path / "env")

    assert f"{env_file}:12: hook compute_reward must be defined with `async def` (benchmax awaits it)" in _lines(report)


async def test_a_rollout_context_without_its_decorator_is_found(tmp_path):
    body = DATA + (
        "\n    async def compute_reward(self, rollout):\n        return {'ok': 1.0}\n"
        "\n    async def rollout_context(self, rollout_id, example):\n        yield\n"
    )
    _env(tmp_path / "env", body)

    report = await _validate(tmp_path / "env")

    assert any("rollout_context must be an async context manager" in line for line in _lines(report))


async def test_a_reward_that_reads_a_field_some_rows_lack_is_found_without_a_model(tmp_path, server):
    reads = "return {'ok': float(rollout.example_args['answer'] == 'x')}"
    body = DATA + f"\n    async def compute_reward(self, rollout):\n        {reads}\n"
    rows = GOOD_LINE + "\n" + '{"prompt_messages": [{"role": "user", "content": "no answer field"}]}\n'
    env_file = _env(tmp_path / "env", body, {"train": GOOD_LINE + "\n", "eval": rows})

    report = await _validate(tmp_path / "env")

    (problem,) = report.problems
    assert problem.where == f"{env_file}:12"
    assert (
        problem.message == f"NewcomerEnv.compute_reward (eval example 1): raised KeyError: 'answer' (at {env_file}:13)"
    )
    assert server.counts["requests"] == 0


async def test_a_reward_that_returns_a_string_is_found_once_at_its_line_without_a_model(tmp_path):
    env_file = _env(
        tmp_path / "env", DATA + "\n    async def compute_reward(self, rollout):\n        return {'ok': 'yes'}\n"
    )

    report = await _validate(tmp_path / "env")

    assert _lines(report) == [
        f"{env_file}:12: NewcomerEnv.compute_reward (train example 0, eval example 0): returned 'ok'='yes' (str); "
        "rewards must be numbers"
    ]
    assert not any("reward hooks ran" in note for note in report.notes), "no 'ok' for hooks that failed"


async def test_reward_hooks_that_work_are_noted_as_ran(tmp_path):
    _env(tmp_path / "env", DATA + "\n    async def compute_reward(self, rollout):\n        return {'ok': 1.0}\n")

    report = await _validate(tmp_path / "env")

    assert not report.problems
    assert "eval: reward hooks ran on 1 synthetic rollout" in report.notes


async def test_a_misspelt_role_and_a_required_property_that_is_not_declared_are_found(tmp_path):
    schema = '{"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a", "b"]}'
    tools = f'[{{"type": "function", "function": {{"name": "add", "parameters": {schema}}}}}]'
    body = DATA + (
        f"\n    async def list_tools(self):\n        return {tools}\n"
        "\n    async def compute_reward(self, rollout):\n        return {'ok': 1.0}\n"
    )
    usr = '{"prompt_messages": [{"role": "usr", "content": "hi"}]}\n'
    _env(tmp_path / "env", body, {"train": GOOD_LINE + "\n", "eval": usr})

    report = await _validate(tmp_path / "env")

    lines = _lines(report)
    assert any(
        line.endswith("tool 'add' requires ['b'], which its parameters' properties do not declare") for line in lines
    )
    assert any(
        "eval.jsonl:1: prompt_messages[0].role 'usr' is not a chat role; use one of system, developer" in line
        for line in lines
    )
    assert len(lines) == 2


async def test_every_bad_line_of_a_file_is_reported_not_only_the_first(tmp_path):
    body = DATA + "\n    async def compute_reward(self, rollout):\n        return {'ok': 1.0}\n"
    bad = GOOD_LINE + "\n{oops\n[1]\n" + GOOD_LINE + "\n{again\n"
    _env(tmp_path / "env", body, {"train": GOOD_LINE + "\n", "eval": bad})

    report = await _validate(tmp_path / "env")

    found = [line.split("eval.jsonl:")[1].split(":")[0] for line in _lines(report)]
    assert found == ["2", "3", "5"]


_HOOK_ENV = """
import contextlib
from benchmax.envs import BaseEnv, Dataset, Example

class HookEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, **options):
        return Dataset([Example("e0", {{"prompt_messages": [{{"role": "user", "content": "hi"}}]}})])

    @contextlib.asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        {enter}
        yield
        {exit}

    async def compute_reward(self, rollout):
        {reward}
        return {{"ok": 1.0}}
"""


@pytest.mark.parametrize(
    ("enter", "exit", "reward", "hook"),
    [
        ("raise RuntimeError('no sandbox')", "pass", "pass", "rollout_context"),
        ("pass", "pass", "raise RuntimeError('no sandbox')", "compute_reward"),
        ("pass", "raise RuntimeError('no sandbox')", "pass", "rollout_context (on exit)"),
    ],
    ids=["context-enter", "reward", "context-exit"],
)
async def test_a_hook_that_raises_is_named_as_the_one_that_failed(tmp_path, enter, exit, reward, hook):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "env.py").write_text(_HOOK_ENV.format(enter=enter, exit=exit, reward=reward))

    report = await _validate(tmp_path / "env")

    (problem,) = report.problems  # once, though the train and the eval example both hit it
    line = 17 if hook == "compute_reward" else 11  # the hook's def (rollout_context's decorator)
    assert problem.where == f"{(tmp_path / 'env' / 'env.py').resolve()}:{line}", _lines(report)
    assert problem.message.startswith(
        f"HookEnv.{hook} (train example 0, eval example 0): raised RuntimeError: no sandbox"
    ), _lines(report)
