"""Env-driven turns on the Ray executor: the workers play the same episodes, turn rewards included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import benchmax
from benchmax.store import open_run
from benchmax.testing import ScriptedServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guess_number"


def _solver():
    spec = importlib.util.spec_from_file_location("guess_policy_for_ray", EXAMPLE / "policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.solver()


def _records(run_dir: Path) -> list[tuple]:
    with open_run(run_dir) as run:
        return sorted(
            (r.rollout_id, r.termination_reason, r.rewards, [(t.rewards, t.env_info) for t in r.turns])
            for r in run.rollouts()
        )


def test_ray_workers_play_env_turns_as_a_local_run_does(tmp_path, ray_cluster):
    with ScriptedServer(_solver()) as server:
        common = {"base_url": server.base_url, "model": "scripted", "group_size": 2, "max_examples": 4}
        local = benchmax.evaluate(str(EXAMPLE), run_dir=tmp_path / "local", **common)
        remote = benchmax.evaluate(str(EXAMPLE), run_dir=tmp_path / "ray", executor="ray", workers=2, **common)
    assert _records(tmp_path / "ray") == _records(tmp_path / "local")
    assert remote.stats.turn_rewards == local.stats.turn_rewards
    assert remote.stats.turn_rewards["hit"].rollouts == 8
