"""Rescoring a mixture through the CLI: each example scored by the env the store's ``examples.env``
names, one env's new code changing that env's rewards only, and the zero-fill kept inside each env."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from runkit import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run

_NEW_B = '''
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset


class BEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        if rollout.example_args["answer"] == "b0":
            return {"rescored": 1.0}
        return {"b_other": 0.5}
'''


def _eval(tmp_path: Path, server, *args: str | Path):
    return run_cli(
        "eval", *args, "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
        "--no-progress",
    )  # fmt: skip


def test_rescore_of_one_env_changes_its_rewards_only_and_fills_components_inside_each_env(tmp_path, server):
    a = write_env(tmp_path / "envs", "a", rows=3, component="only_a")
    b = write_env(tmp_path / "envs", "b", rows=3, component="correct")
    assert _eval(tmp_path, server, a, b).returncode == 0
    new_b = tmp_path / "v2" / "b"
    new_b.mkdir(parents=True)
    (new_b / "env.py").write_text(_NEW_B)
    for split in ("eval", "train"):
        (new_b / f"{split}.jsonl").write_text((b / f"{split}.jsonl").read_text())

    result = run_cli("rescore", tmp_path / "run", "--env", f"b={new_b}", "--run-dir", tmp_path / "rescored")

    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        before = {r.rollout_id: r for r in run.rollouts()}
    with open_run(tmp_path / "rescored") as run:
        after = list(run.rollouts())
        suite = {figures.env: figures for figures in run.suite()}
    assert {r.rollout_id for r in after} == set(before)
    by_env: dict[str | None, list] = {}
    for rollout in after:
        by_env.setdefault(rollout.env, []).append(rollout)
    assert sorted(by_env) == ["a", "b"] and len(by_env["a"]) == len(by_env["b"]) == 3
    for rollout in by_env["a"]:
        old = before[rollout.rollout_id]
        assert rollout.rewards == old.rewards == {"only_a": 1.0}, "env a kept its stored code's scores"
        assert not rollout.filled
    for rollout in by_env["b"]:
        assert "only_a" not in rollout.rewards and "correct" not in rollout.rewards, rollout.rewards
        if rollout.final_text == "b0":
            assert rollout.raw_rewards == {"rescored": 1.0} and rollout.rewards == {"rescored": 1.0, "b_other": 0.0}
            assert rollout.filled == {"b_other"}
        else:
            assert rollout.raw_rewards == {"b_other": 0.5} and rollout.rewards == {"b_other": 0.5, "rescored": 0.0}
            assert rollout.filled == {"rescored"}
    assert set(suite["a"].components) == {"only_a"}
    assert set(suite["b"].components) == {"rescored", "b_other"}
    with sqlite3.connect(tmp_path / "rescored" / "run.sqlite") as conn:
        stored = dict(conn.execute("SELECT example_id, env FROM examples"))
    assert set(stored.values()) == {"a", "b"}, "the rescored run keeps each example's env"

