"""``validate_env``: every problem of a broken env is reported with where it is."""

from __future__ import annotations

import pytest
from runkit import GOOD_LINE, write_checked_env

from benchmax.envs import EnvSpec
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
    assert {"0 tools: none", "train: 1 examples checked", "eval: 1 examples checked"} <= set(report.notes)


async def test_an_import_error_is_reported_with_the_file_and_line(tmp_path):
    env_file = write_checked_env(tmp_path / "env", prelude="import no_such_module_for_benchmax_tests")

    report = await _validate(tmp_path / "env")

    assert [(p.where, p.message.split(":")[0:2]) for p in report.problems] == [
        (str(tmp_path / "env"), [str(env_file), "2"])
    ]
    assert "ModuleNotFoundError: No module named 'no_such_module_for_benchmax_tests'" in report.problems[0].message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reward": False}, "CheckedEnv implements neither compute_reward nor compute_group_rewards"),
        ({"max_turns": "0"}, "CheckedEnv.max_turns must be a positive int, got 0"),
        ({"max_turns": "None"}, "CheckedEnv.max_turns is not set"),
    ],
    ids=["no-scoring-hook", "zero-max-turns", "unset-max-turns"],
)
async def test_an_unusable_env_definition_is_reported_against_the_class(tmp_path, options, message):
    env_file = write_checked_env(tmp_path / "env", **options)

    report = await _validate(tmp_path / "env")

    assert len(report.problems) == 1
    assert report.problems[0].where == f"{env_file.resolve()}:CheckedEnv"
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
        f"{where}.list_tools: CheckedEnv.list_tools()[0] ('add'): invalid JSON Schema in function.parameters at "
        "properties/a/type: 'integr' is not valid under any of the given schemas"
    )
    assert (
        train
        == f"{where}.create_dataset('train'): {tmp_path.resolve() / 'env' / 'train.jsonl'}: dataset file not found"
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
