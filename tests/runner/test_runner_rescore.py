"""Rescoring: the env's current reward code over stored transcripts, into a new run, no model calls."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runkit import ENV_FILE, events, row, write_split

from benchmax import open_run
from benchmax.envs import EnvDefinitionError
from benchmax.runner import RunConfig, arescore, arun

ANCHOR = 'rewards = {"correct": float(answer == rollout.example_args["answer"])}'
BUGGY = f"if rollout.example_args['answer'] == 'boom':\n            raise ValueError('reward bug')\n        {ANCHOR}"
EXTENDED = ANCHOR.replace("}", ', "length": float(len(answer))}')


def _records(run_dir: Path) -> dict[str, tuple]:
    with open_run(run_dir) as run:
        return {
            record.messages[0]["content"].split("\n")[0] + f"#{record.sample_index}": (
                record.termination_reason,
                record.raw_rewards,
                record.rewards,
                sorted(record.filled),
            )
            for record in run.rollouts()
        }


async def test_rescoring_with_changed_reward_code_writes_a_new_run_without_model_calls(tmp_path, server):
    source = ENV_FILE.read_text()
    assert ANCHOR in source
    env_file = tmp_path / "env.py"
    env_file.write_text(source.replace(ANCHOR, BUGGY))
    write_split(tmp_path / "data", [
        row("4", "right"), row("x", "wrong", answers=["y"]), row("boom", "reward bug"),
        row("5", "model error", script=[{"status": 400}]),
    ])  # fmt: skip
    config = RunConfig(
        env=f"{env_file}:ScoredEnv", env_kwargs={"trace_dir": str(tmp_path / "trace")}, data_dir=tmp_path / "data",
        base_url=server.base_url, model="scripted", group_size=2, run_dir=tmp_path / "before",
    )  # fmt: skip
    await arun(config)
    assert _records(tmp_path / "before")["reward bug#0"][0] == "reward_error"
    requests = server.counts["requests"]
    enters = events(tmp_path / "trace")["enter"]
    env_file.write_text(source.replace(ANCHOR, EXTENDED))

    target = await arescore(tmp_path / "before", run_dir=tmp_path / "after")

    assert target == tmp_path / "after"
    assert server.counts["requests"] == requests, "rescoring called the model"
    assert events(tmp_path / "trace")["enter"] == 2 * enters, "each rollout's context is entered again"
    after = _records(tmp_path / "after")
    for sample in (0, 1):
        assert after[f"right#{sample}"] == (
            "finished",
            {"correct": 1.0, "length": 1.0},
            {"correct": 1.0, "length": 1.0},
            [],
        )
        assert after[f"wrong#{sample}"] == (
            "finished",
            {"correct": 0.0, "length": 1.0},
            {"correct": 0.0, "length": 1.0},
            [],
        )
        assert after[f"reward bug#{sample}"] == (
            "finished",
            {"correct": 1.0, "length": 4.0},
            {"correct": 1.0, "length": 4.0},
            [],
        )
        assert after[f"model error#{sample}"] == (
            "model_error",
            {},
            {"correct": 0.0, "length": 0.0},
            ["correct", "length"],
        )
    with open_run(tmp_path / "before") as old, open_run(tmp_path / "after") as new:
        assert [(r.rollout_id, r.group_id, r.batch, r.messages) for r in old.rollouts()] == [
            (r.rollout_id, r.group_id, r.batch, r.messages) for r in new.rollouts()
        ]
        assert [r.error for r in new.rollouts() if r.termination_reason == "model_error"] == [
            r.error for r in old.rollouts() if r.termination_reason == "model_error"
        ]
        assert new.meta["kind"] == "rescore"
        assert new.meta["rescored_from"] == str(tmp_path / "before")
        assert new.meta["status"] == "completed"
        assert old.meta["status"] == "completed", "the source run is left as it was"


async def test_rescoring_into_a_default_directory_names_it_after_the_source(tmp_path, server):
    write_split(tmp_path / "data", [row("4", "right")])
    config = RunConfig(
        env=f"{ENV_FILE}:ScoredEnv", data_dir=tmp_path / "data", base_url=server.base_url, model="scripted",
        run_dir=tmp_path / "base",
    )  # fmt: skip
    await arun(config)

    target = await arescore(tmp_path / "base")

    assert target.parent == tmp_path and target.name.startswith("base-rescored-")
    with open_run(target) as run:
        assert [record.rewards for record in run.rollouts()] == [{"correct": 1.0}]


async def test_a_rescore_that_breaks_is_marked_failed_with_the_reason_not_left_running(tmp_path, server):
    source = ENV_FILE.read_text()
    env_file = tmp_path / "env.py"
    env_file.write_text(source)
    write_split(tmp_path / "data", [row("4", "right")])
    config = RunConfig(
        env=f"{env_file}:ScoredEnv", data_dir=tmp_path / "data", base_url=server.base_url, model="scripted",
        run_dir=tmp_path / "before",
    )  # fmt: skip
    await arun(config)
    # The reward code now declares a tool whose schema is broken: the rescore cannot start.
    bad_tools = (
        "    async def list_tools(self):\n"
        "        return [{'type': 'function', 'function': {'name': 'x', 'parameters': {'type': 'array'}}}]\n"
    )
    broken = source.replace("class ScoredEnv(BaseEnv):", "class ScoredEnv(BaseEnv):\n" + bad_tools, 1)
    env_file.write_text(broken)

    with pytest.raises(EnvDefinitionError, match="must describe an object"):
        await arescore(tmp_path / "before", run_dir=tmp_path / "after")

    with open_run(tmp_path / "after") as run:
        assert run.meta["status"] == "failed"
        assert "must describe an object" in run.meta["error"]
        assert run.meta["kind"] == "rescore"


def _indexes(run_dir: Path) -> set[str]:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return {
            f"{name}:{unique}:{','.join(info[2] for info in conn.execute(f'PRAGMA index_info({name!r})'))}"
            for _, name, unique, *_ in conn.execute("PRAGMA index_list('rollouts')")
        }
    finally:
        conn.close()


async def test_rescoring_in_worker_processes_matches_rescoring_in_process_and_leaves_a_complete_file(
    tmp_path, server, capfd
):
    write_split(tmp_path / "data", [row(str(n), f"q{n}", answers=[str(n % 3)]) for n in range(12)])
    config = RunConfig(
        env=f"{ENV_FILE}:ScoredEnv", data_dir=tmp_path / "data", base_url=server.base_url, model="scripted",
        group_size=2, run_dir=tmp_path / "source",
    )  # fmt: skip
    await arun(config)

    await arescore(tmp_path / "source", run_dir=tmp_path / "here", workers=1)
    await arescore(tmp_path / "source", run_dir=tmp_path / "workers", workers=2)

    assert _records(tmp_path / "workers") == _records(tmp_path / "here")
    assert len(_records(tmp_path / "workers")) == 24
    assert "Traceback" not in capfd.readouterr().err, "a worker failed as it exited"
    # the bulk copy built its indexes at the end: the same ones an eval's file has, unique ids included
    assert _indexes(tmp_path / "workers") == _indexes(tmp_path / "here") == _indexes(tmp_path / "source")
    assert any(index.startswith("rollouts_by_id:1:rollout_id") for index in _indexes(tmp_path / "workers"))
    conn = sqlite3.connect(tmp_path / "workers" / "run.sqlite")
    try:
        analysed = {table for (table,) in conn.execute("SELECT tbl FROM sqlite_stat1")}
    finally:
        conn.close()
    assert {"rollouts", "groups"} <= analysed, "the planner's statistics were not kept"
