"""``benchmax export``, ``rescore`` and ``diff`` over stored runs, in real subprocesses."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from runkit import ENV_FILE, row, run_cli, write_split

from benchmax import open_run
from benchmax.envs import canonical_example_id
from benchmax.runner import RunConfig, arun
from benchmax.store import read_jsonl_export

ANCHOR = '{"correct": float(answer == rollout.example_args["answer"])}'
DOUBLED = '{"correct": 2.0 * float(answer == rollout.example_args["answer"])}'
ROWS = [row("4", "right"), row("x", "wrong", answers=["y"])]


@pytest.fixture
async def stored(tmp_path: Path, server) -> Path:
    """A finished run of an env file that the test may edit afterwards."""
    (tmp_path / "env.py").write_text(ENV_FILE.read_text())
    write_split(tmp_path / "data", ROWS)
    config = RunConfig(
        env=f"{tmp_path / 'env.py'}:ScoredEnv", data_dir=tmp_path / "data", base_url=server.base_url,
        model="scripted", run_dir=tmp_path / "run",
    )  # fmt: skip
    await arun(config)
    return tmp_path / "run"


def test_export_writes_jsonl_beside_the_run_that_reads_back_as_the_same_records(stored):
    result = run_cli("export", stored)

    assert result.returncode == 0, result.stdout
    assert f"wrote 2 rollouts to {stored / 'rollouts.jsonl'}" in result.stdout
    with open_run(stored) as run:
        assert list(read_jsonl_export(stored / "rollouts.jsonl")) == list(run.rollouts())


def test_export_writes_parquet_where_asked(stored, tmp_path):
    result = run_cli("export", stored, "--format", "parquet", "--output", tmp_path / "out" / "all.parquet")

    assert result.returncode == 0, result.stdout
    rows = pq.read_table(tmp_path / "out" / "all.parquet").to_pylist()
    assert sorted((r["rollout_id"], orjson.loads(r["rewards"])["correct"]) for r in rows) == sorted(
        (f"eval/{canonical_example_id(item)}#0", 1.0 if item["answer"] == "4" else 0.0) for item in ROWS
    )


def test_export_refuses_an_unknown_format(stored):
    result = run_cli("export", stored, "--format", "csv")

    assert result.returncode == 2
    assert "unknown export format 'csv'; use one of jsonl, parquet" in result.stdout


def test_rescore_after_a_reward_change_then_diff_shows_the_deltas(stored, tmp_path, server):
    env_file = tmp_path / "env.py"
    env_file.write_text(env_file.read_text().replace(ANCHOR, DOUBLED))
    requests = server.counts["requests"]

    rescored = run_cli("rescore", stored, "--run-dir", tmp_path / "rescored")
    diffed = run_cli("diff", stored, tmp_path / "rescored")

    assert rescored.returncode == 0, rescored.stdout
    assert server.counts["requests"] == requests, "rescoring called the model"
    assert f"compare with: benchmax diff {stored} {tmp_path / 'rescored'}" in rescored.stdout
    assert "reward components (after zero-fill)" in rescored.stdout
    with open_run(tmp_path / "rescored") as run:
        assert sorted(record.rewards["correct"] for record in run.rollouts()) == [0.0, 2.0]
    assert diffed.returncode == 0, diffed.stdout
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in diffed.stdout.splitlines() if "│" in line]
    right = canonical_example_id(ROWS[0])
    # A: correct 1, 0 (mean .5); B: 2, 0 (mean 1). Only the right answer's example changed, by +1.
    assert rows == [
        ["reward", "0.5000", "1.0000", "+0.5000"],
        ["correct", "0.5000", "1.0000", "+0.5000"],
        [right, "reward", "1.0000", "2.0000", "+1.0000"],
        [right, "correct", "1.0000", "2.0000", "+1.0000"],
    ]
    assert "examples with the largest changes (2 changed)" in diffed.stdout
    assert "warning: env code differs: A " in diffed.stdout and "changed: env.py" in diffed.stdout
    assert "reward deltas below may come from these changes" in diffed.stdout
    assert "data differs" not in diffed.stdout, "rescoring reads the source run's transcripts, not new data"


def test_rescore_and_diff_of_a_missing_run_say_so(tmp_path):
    rescored = run_cli("rescore", tmp_path / "nothing")
    diffed = run_cli("diff", tmp_path / "nothing", tmp_path / "nothing")

    assert (rescored.returncode, diffed.returncode) == (2, 2)
    assert f"no benchmax run at {tmp_path / 'nothing'}" in rescored.stdout
    assert f"no benchmax run at {tmp_path / 'nothing'}" in diffed.stdout


async def test_diff_warns_when_two_runs_read_different_data_and_not_when_nothing_changed(stored, tmp_path, server):
    write_split(tmp_path / "data", [*ROWS, row("5", "another")])
    config = RunConfig(
        env=f"{tmp_path / 'env.py'}:ScoredEnv", data_dir=tmp_path / "data", base_url=server.base_url,
        model="scripted", run_dir=tmp_path / "more-data",
    )  # fmt: skip
    await arun(config)

    changed = run_cli("diff", stored, tmp_path / "more-data")
    same = run_cli("diff", stored, stored)

    assert changed.returncode == 0, changed.stdout
    assert "warning: data differs: A " in changed.stdout and "changed: eval.jsonl" in changed.stdout
    assert "env code differs" not in changed.stdout
    assert same.returncode == 0, same.stdout
    assert "warning" not in same.stdout


def test_rescore_shows_the_new_runs_provenance_with_the_source_runs_data(stored, tmp_path):
    rescored = run_cli("rescore", stored, "--run-dir", tmp_path / "rescored")

    assert rescored.returncode == 0, rescored.stdout
    [code] = [line for line in rescored.stdout.splitlines() if line.strip("│ ").startswith("code ")]
    [data] = [line for line in rescored.stdout.splitlines() if line.strip("│ ").startswith("data ")]
    with open_run(tmp_path / "rescored") as run:
        provenance = run.meta["provenance"]
    assert provenance["code"]["sha256"][:12] in code
    assert provenance["data"]["files"][0]["sha256"][:12] in data and "eval.jsonl" in data
    assert set(provenance["inherited"]) == {"data", "model", "endpoint", "sampling"}
