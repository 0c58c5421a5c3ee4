"""``tools_for`` through an eval run and ``benchmax validate``: a bad set fails its examples, named."""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from pathlib import Path

import pytest
import tools_for_env
from runkit import write_split
from tools_for_env import RowToolsEnv

from benchmax import open_run
from benchmax.envs import canonical_example_id
from benchmax.loading import EnvSpec
from benchmax.runner import RunConfig, arun, validate_env

SPEC = f"{tools_for_env.__file__}:RowToolsEnv"
TOOLS_FOR_LINE = inspect.getsourcelines(RowToolsEnv.tools_for)[1]
CALC = [{"tool_calls": [{"name": "calculator", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}]


def _row(kind: str, steps: list[dict], answer: str) -> dict:
    content = f"{kind} row\n#script: {json.dumps(steps)}"
    return {"prompt_messages": [{"role": "user", "content": content}], "kind": kind, "answer": answer}


TEXT_ROW = _row("text", [{"content": "hi"}], "hi")
CALC_ROW = _row("calculator", CALC, "5")
CALC_ID = canonical_example_id(CALC_ROW)

FAILURES = {
    "raises": "RowToolsEnv.tools_for raised KeyError: 'no tool table for this row'",
    "bad_schema": "RowToolsEnv.tools_for()[0] ('calculator'): invalid JSON Schema in function.parameters",
    "not_a_list": "RowToolsEnv.tools_for() must return a list, got dict",
}
ENGINE_FAILURES = {
    "raises": f"RowToolsEnv.tools_for(example {CALC_ID!r}) raised KeyError: 'no tool table for this row'",
    "bad_schema": f"the tools of example {CALC_ID!r} are not valid: {FAILURES['bad_schema']}",
    "not_a_list": f"the tools of example {CALC_ID!r} are not valid: {FAILURES['not_a_list']}",
}


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_split(data, [TEXT_ROW], "train")
    write_split(data, [TEXT_ROW, CALC_ROW], "eval")
    return data


@pytest.mark.parametrize("broken", sorted(FAILURES))
async def test_validate_names_the_example_whose_tool_set_fails(tmp_path, broken):
    data = _data(tmp_path)

    report = await validate_env(EnvSpec(SPEC, {"broken": broken}), data_dir=data)

    problems = [(problem.where, problem.message) for problem in report.problems]
    assert len(problems) == 1, problems
    where, message = problems[0]
    assert where == f"{tools_for_env.__file__}:{TOOLS_FOR_LINE}"
    assert FAILURES[broken] in message
    assert message.endswith(f"[for example {CALC_ID!r} ({data / 'eval.jsonl'}:2)]")
    assert "tools_for: 1 distinct valid tool set over " in " ".join(report.notes)


async def test_validate_checks_each_distinct_set_and_calls_each_tool_once(tmp_path):
    report = await validate_env(EnvSpec(SPEC), data_dir=_data(tmp_path))

    assert report.ok, report.problems
    assert "tools_for: 2 distinct valid tool sets over 3 examples" in report.notes
    assert "tools called once each with placeholder arguments: 1 of 1" in report.notes


@pytest.mark.parametrize("broken", sorted(FAILURES))
async def test_an_eval_run_stores_the_failing_examples_rollouts_and_runs_the_others(tmp_path, server, broken):
    config = RunConfig(
        env=SPEC,
        env_kwargs={"broken": broken},
        data_dir=_data(tmp_path),
        base_url=server.base_url,
        model="scripted",
        group_size=2,
        run_dir=tmp_path / "run",
    )
    result = await arun(config)

    with open_run(tmp_path / "run") as run:
        records = list(run.rollouts())
    by_example: dict[str, list] = {}
    for record in records:
        by_example.setdefault(record.example_id, []).append(record)
    assert len(by_example) == 2
    for example_id, rollouts in by_example.items():
        if example_id == CALC_ID:
            assert [r.termination_reason for r in rollouts] == ["context_error"] * 2
            assert all(r.error and ENGINE_FAILURES[broken] in r.error for r in rollouts)
        else:
            assert [r.termination_reason for r in rollouts] == ["finished"] * 2
            assert [r.rewards for r in rollouts] == [{"correct": 1.0}] * 2
    assert not result.verdict.ok, "half the rollouts failing operationally fails the run"


async def test_an_eval_run_with_good_sets_scores_both_row_types(tmp_path, server):
    config = RunConfig(env=SPEC, data_dir=_data(tmp_path), base_url=server.base_url, model="scripted")
    result = await arun(replace(config, run_dir=tmp_path / "run"))

    assert result.verdict.ok
    calc_requests = [b for b in server.requests if b["messages"][0]["content"].startswith("calculator row")]
    text_requests = [b for b in server.requests if b["messages"][0]["content"].startswith("text row")]
    assert calc_requests and all([t["function"]["name"] for t in b["tools"]] == ["calculator"] for b in calc_requests)
    assert text_requests and all("tools" not in b for b in text_requests)
