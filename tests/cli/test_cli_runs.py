"""``benchmax export``, ``rescore`` and ``diff`` over stored runs, in real subprocesses."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from runkit import ENV_FILE, ENV_SPEC, cli_env, row, run_cli, write_split

from benchmax import open_run
from benchmax.envs import SamplingParams, canonical_example_id
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
    assert sorted((r["rollout_id"], r["reward.correct"]) for r in rows) == sorted(
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
    # One component is the total reward: each figure is listed once, the example by its prompt.
    assert rows == [
        ["correct", "0.5000", "1.0000", "+0.5000"],
        [right[:8], "1.0000", "2.0000", "+1.0000", 'right #answers: ["4"]'],
    ]
    assert "examples with the largest changes (1 example changed)" in diffed.stdout
    assert "warning: env code differs: A " in diffed.stdout and "changed: env.py" in diffed.stdout
    assert "reward deltas below may come from these changes" in diffed.stdout
    assert "data differs" not in diffed.stdout, "rescoring reads the source run's transcripts, not new data"


ON_RAY = DOUBLED.replace(
    "}", ', "on_ray": float(bool(__import__("ray").get_runtime_context().get_actor_id()))}'
)


def test_rescore_with_executor_ray_scores_on_ray_actors(stored, tmp_path, server):
    env_file = tmp_path / "env.py"
    env_file.write_text(env_file.read_text().replace(ANCHOR, ON_RAY))
    requests = server.counts["requests"]

    rescored = run_cli(
        "rescore", stored, "--run-dir", tmp_path / "rescored", "--executor", "ray", "--workers", "1", timeout=300
    )

    assert rescored.returncode == 0, rescored.stdout
    assert server.counts["requests"] == requests, "rescoring called the model"
    with open_run(tmp_path / "rescored") as run:
        assert sorted((r.rewards["correct"], r.rewards["on_ray"]) for r in run.rollouts()) == [(0.0, 1.0), (2.0, 1.0)]
        assert run.meta["rescored_from"] == str(stored)


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


async def test_export_carries_each_rollouts_example_fields_and_advantage(tmp_path, server):
    # siblings answer "7" then "x": rewards 1 and 0, so advantages +1 and -1 (GRPO: minus the mean, over the std)
    write_split(tmp_path / "data", [row("7", "split", answers=["7", "x"]), row("4", "tie")])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", group_size=2,
        run_dir=tmp_path / "run", sampling=SamplingParams(seed=0),
    )  # fmt: skip
    await arun(config)

    jsonl = run_cli("export", tmp_path / "run")
    parquet = run_cli("export", tmp_path / "run", "--format", "parquet")

    assert (jsonl.returncode, parquet.returncode) == (0, 0), jsonl.stdout + parquet.stdout
    lines = [orjson.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_bytes().splitlines()]
    table = pq.read_table(tmp_path / "run" / "rollouts.parquet").to_pylist()
    expected = {
        "eval/" + canonical_example_id(row("7", "split", answers=["7", "x"])) + "#0": ({"answer": "7"}, 1.0),
        "eval/" + canonical_example_id(row("7", "split", answers=["7", "x"])) + "#1": ({"answer": "7"}, -1.0),
        "eval/" + canonical_example_id(row("4", "tie")) + "#0": ({"answer": "4"}, 0.0),
        "eval/" + canonical_example_id(row("4", "tie")) + "#1": ({"answer": "4"}, 0.0),
    }
    assert {line["rollout_id"]: (line["example_args"], line["advantage"]) for line in lines} == expected
    assert {r["rollout_id"]: (orjson.loads(r["example_args"]), r["advantage"]) for r in table} == expected


def test_export_formats_are_a_choice_checked_before_the_run_is_opened(tmp_path):
    result = run_cli("export", tmp_path / "no-run", "--format", "csv")
    helped = run_cli("export", "--help")

    assert result.returncode == 2
    assert "unknown export format 'csv'; use one of jsonl, parquet" in result.stdout
    assert "no benchmax run" not in result.stdout
    assert "<jsonl|parquet>" in helped.stdout


async def _run(tmp_path: Path, server, name: str, rows, env: str = ENV_SPEC) -> Path:
    write_split(tmp_path / f"data-{name}", rows)
    config = RunConfig(
        env=env, data_dir=tmp_path / f"data-{name}", base_url=server.base_url, model="scripted",
        run_dir=tmp_path / name,
    )  # fmt: skip
    await arun(config)
    return tmp_path / name


async def test_diff_of_runs_sharing_no_example_refuses_unless_forced_and_names_both_envs(tmp_path, server):
    other = tmp_path / "other_env.py"
    other.write_text(ENV_FILE.read_text().replace("class ScoredEnv", "class OtherEnv"))
    a = await _run(tmp_path, server, "sql", [row("1", "select one")])
    b = await _run(tmp_path, server, "math", [row("2", "add one and one"), row("3", "add")], env=f"{other}:OtherEnv")

    refused = run_cli("diff", a, b)
    forced = run_cli("diff", a, b, "--force")

    assert refused.returncode == 2, refused.stdout
    lines = refused.stdout.splitlines()
    warning = next(line for line in lines if line.startswith("warning: the runs are of different envs: A ran "))
    assert warning.endswith("other_env.OtherEnv") and ".scored_env.ScoredEnv, B ran " in warning
    assert (
        "error: A and B share no example (A has 1 example with rollouts, B has 2): there is nothing to compare; "
        "pass --force to print the tables anyway" in refused.stdout
    )
    assert "components (B - A)" not in refused.stdout
    assert forced.returncode == 0, forced.stdout
    assert "components (B - A)" in forced.stdout and "examples: none changed (0 examples compared)" in forced.stdout
    assert "warning: A and B share no example" in forced.stdout
    assert "examples only in A: 1, only in B: 2 (not compared)" in forced.stdout


async def test_diff_of_a_multi_component_env_shows_one_row_per_example_with_each_components_delta(tmp_path, server):
    # A: totals 1.5 (1 + .5) and .25 (0 + .25); the doubled reward makes the right one 2.5
    rows = [row("4", "right with bonus", bonus=0.5), row("x", "wrong", answers=["y"], bonus=0.25)]
    (tmp_path / "env.py").write_text(ENV_FILE.read_text())
    a = await _run(tmp_path, server, "a", rows, env=f"{tmp_path / 'env.py'}:ScoredEnv")
    env_file = tmp_path / "env.py"
    env_file.write_text(env_file.read_text().replace(ANCHOR, DOUBLED))
    assert run_cli("rescore", a, "--run-dir", tmp_path / "b").returncode == 0

    diffed = run_cli("diff", a, tmp_path / "b")

    assert diffed.returncode == 0, diffed.stdout
    table = [[cell.strip() for cell in line.split("│")[1:-1]] for line in diffed.stdout.splitlines() if "│" in line]
    header = next(line for line in diffed.stdout.splitlines() if "example" in line and "┃" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "example", "A", "B", "delta", "changed components", "prompt",
    ]  # fmt: skip
    right = canonical_example_id(rows[0])
    assert table == [
        ["reward", "0.8750", "1.3750", "+0.5000"],
        ["bonus", "0.3750", "0.3750", "+0.0000"],
        ["correct", "0.5000", "1.0000", "+0.5000"],
        [right[:8], "1.5000", "2.5000", "+1.0000", "correct +1.0000", 'right with bonus #answers: ["4"]'],
    ]


@pytest.mark.parametrize("columns", [80, 120])
async def test_diff_fits_the_terminal_with_whole_ids_and_numbers_and_cuts_only_the_prompt(tmp_path, server, columns):
    long_prompt = "a prompt far longer than any terminal is wide " * 4
    rows = [row("4", f"right {long_prompt}", bonus=0.5), row("x", f"wrong {long_prompt}", answers=["y"], bonus=0.25)]
    (tmp_path / "env.py").write_text(ENV_FILE.read_text())
    a = await _run(tmp_path, server, "a", rows, env=f"{tmp_path / 'env.py'}:ScoredEnv")
    env_file = tmp_path / "env.py"
    env_file.write_text(env_file.read_text().replace(ANCHOR, DOUBLED))
    assert run_cli("rescore", a, "--run-dir", tmp_path / "b").returncode == 0

    diffed = run_cli("diff", a, tmp_path / "b", env=cli_env(COLUMNS=str(columns)))

    assert diffed.returncode == 0, diffed.stdout
    lines = diffed.stdout.splitlines()
    table_lines = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert max(len(line) for line in table_lines) <= columns, diffed.stdout
    [example] = [line for line in lines if line.startswith("│ ") and "correct +1.0000" in line]
    cells = [cell.strip() for cell in example.split("│")[1:-1]]
    assert cells[:4] == [canonical_example_id(rows[0])[:8], "1.5000", "2.5000", "+1.0000"], diffed.stdout
    assert cells[5].startswith("right a") and cells[5].endswith("…"), "only the prompt is cut"
    assert "..." not in diffed.stdout and "…" not in "".join(cells[:5])
