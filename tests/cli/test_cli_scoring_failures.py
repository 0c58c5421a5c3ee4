"""A reward that failed is a failure in every face of a run (issue #30.1), end to end.

``benchmax eval`` in a real subprocess against the scripted server: every
rollout stops at ``max_turns`` (a budget stop, so its reason stays
``max_turns_exceeded`` as in 0.2.x), and ``compute_reward`` fails for the
examples marked ``fail``. The store's ``scored`` column, the summary, the exit
code under ``--max-failure-rate``, the inspector's run state and the export all
count those rollouts as failed; the group hook's component is not stored beside
the error.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from runkit import run_cli, write_split

from benchmax import open_run
from benchmax.inspector.catalog import RunCatalog

ENV = '''
import math

from benchmax.envs import BaseEnv, JsonlDataset


class FailingRewardEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "stepped"

    async def compute_reward(self, rollout):
        how = rollout.example_args.get("fail")
        if how == "string":
            return "1.0"
        if how == "nan":
            return {"score": math.nan}
        if how == "raise":
            raise KeyError("answer")
        if how == "huge":
            return {f"component-{i}-" + "k" * 100: 0.0 for i in range(100_000)}
        return {"score": 0.5}

    async def compute_group_rewards(self, rollouts):
        return [{"rank": 1.0} for _ in rollouts]
'''

STEP = [{"tool_calls": [{"name": "step"}]}]


def _row(number: int, fail: str | None) -> dict:
    content = f"question {number}\n#script: {json.dumps(STEP)}"
    payload: dict = {"prompt_messages": [{"role": "user", "content": content}], "answer": "x"}
    if fail is not None:
        payload["fail"] = fail
    return payload


def _eval(tmp_path: Path, server, fails: list[str | None], *extra: str) -> tuple[object, Path]:
    (tmp_path / "env.py").write_text(ENV)
    write_split(tmp_path / "data", [_row(number, fail) for number, fail in enumerate(fails)])
    run_dir = tmp_path / "run"
    result = run_cli(
        "eval", f"{tmp_path / 'env.py'}:FailingRewardEnv", "--data-dir", tmp_path / "data",
        "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_dir, "--group-size", "2", *extra,
    )  # fmt: skip
    return result, run_dir


def _cells(output: str, first: str) -> list[str]:
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no table row {first!r} in:\n{output}")


def test_budget_stops_whose_reward_failed_are_failures_everywhere(tmp_path, server):
    result, run_dir = _eval(tmp_path, server, ["string", "nan", "raise", "huge"])

    out = result.stdout
    assert result.returncode == 1, out
    assert _cells(out, "rollouts") == ["rollouts", "8 (0 scored, 8 failed)"]
    assert "no rollout could be scored: all 8 failed, most as max_turns_exceeded (8)" in out
    assert "max_turns_exceeded (8): first error: compute_reward must return a dict" in out

    with open_run(run_dir) as run:
        rows = run.sql("SELECT termination_reason, scored, reward FROM rollouts ORDER BY seq")
        components = run.sql("SELECT COUNT(*) FROM rewards WHERE filled = 0")[0][0]
        records = list(run.rollouts())
    assert rows == [("max_turns_exceeded", 0, None)] * 8
    assert components == 0, "no group component is stored beside a reward error"
    assert not any(record.scored for record in records)
    assert {record.error for record in records} == {
        "compute_reward must return a dict of {component: number}, got str",
        "compute_reward returned 'score'=nan; rewards must be finite",
        "compute_reward raised KeyError: 'answer'",
        "compute_reward returned 100000 reward components, more than the 256 allowed; "
        "return a few named components (per-item detail belongs in the rollout's logs)",
    }
    assert (run_dir / "run.sqlite").stat().st_size < 2_000_000, "a hostile reward map is not stored"

    catalog = RunCatalog(run_dir)
    try:
        summary = catalog.summary(run_dir.name)
    finally:
        catalog.close()
    assert (summary["scored"], summary["failed"], summary["failure_rate"]) == (0, 8, 1.0)
    assert summary["state"] == {"status": "completed", "tone": "bad", "note": "every rollout failed"}

    exported = run_cli("export", run_dir, "--output", tmp_path / "out.jsonl")
    assert exported.returncode == 0, exported.stdout
    lines = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [(line["scored"], line["raw_rewards"]) for line in lines] == [(False, {})] * 8


@pytest.mark.parametrize(("rate", "code"), [("0.2", 1), ("0.3", 0)])
def test_reward_failures_count_against_the_max_failure_rate(tmp_path, server, rate, code):
    result, run_dir = _eval(tmp_path, server, ["nan", None, None, None], "--max-failure-rate", rate)

    out = result.stdout
    assert result.returncode == code, out
    assert _cells(out, "rollouts") == ["rollouts", "8 (6 scored, 2 failed)"]
    if code:
        assert "2 of 8 rollouts (25.0%) failed operationally, more than --max-failure-rate 0.2" in out
    with open_run(run_dir) as run:
        scored = run.sql("SELECT scored, COUNT(*) FROM rollouts GROUP BY scored ORDER BY scored")
        ranked = run.sql("SELECT COUNT(*) FROM rewards WHERE component = 'rank' AND filled = 0")[0][0]
    assert scored == [(0, 2), (1, 6)]
    assert ranked == 6, "the group component goes to the six scored rollouts only"
