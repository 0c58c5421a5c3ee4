"""An env that drives its turns, served: ``benchmax eval http://...`` plays the same episodes as a local run.

A real ``benchmax serve`` process holds the env; each env turn goes over the wire
(``POST /sessions/{id}/env_response``) and the turn records, rewards and failures a
remote run stores are the local run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from runkit import run_cli
from serve_support import scripted, wait_until, write_rows

from benchmax.store import open_run
from benchmax.testing import free_port

ENV_CODE = """
from benchmax.envs import BaseEnv, EnvResponse, JsonlDataset


class TurnsEnv(BaseEnv):
    max_turns = 3
    outcome_from_transcript = True

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def env_response(self, rollout):
        turn = len(rollout.turns) - 1
        action = rollout.example_args["plan"][turn]
        if action == "raise":
            raise ValueError("the board is broken")
        if action == "tuple":
            return ("higher", 0.0)
        if action == "nan":
            return EnvResponse(["x"], rewards={"step": float("nan")})
        return EnvResponse([f"move {turn} seen"], rewards={"step": float(turn)}, done=action == "done", info=action)

    async def compute_reward(self, rollout):
        return {"turns": float(len(rollout.turns))}
"""

ROWS = [
    scripted("game", [{"content": "a"}, {"content": "b"}, {"content": "c"}], "", plan=["say", "done"]),
    scripted("endless", [{"content": "a"}] * 3, "", plan=["say", "say", "say"]),
    scripted("crash", [{"content": "a"}, {"content": "b"}], "", plan=["say", "raise"]),
    scripted("junk", [{"content": "a"}], "", plan=["tuple"]),
    scripted("nan", [{"content": "a"}], "", plan=["nan"]),
]


@pytest.fixture
def served(tmp_path):
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "env.py").write_text(ENV_CODE)
    data = write_rows(tmp_path / "data", ROWS)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "serve", str(env_dir), "--port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    wait_until("the env server answering", answers, proc=process)
    yield env_dir, data, f"http://127.0.0.1:{port}"
    process.send_signal(signal.SIGKILL)
    process.wait()


def _records(run_dir: Path) -> dict[str, dict]:
    with open_run(run_dir) as run:
        return {
            record.rollout_id: {
                "reason": record.termination_reason,
                "error": record.error,
                "rewards": record.rewards,
                "messages": record.messages,
                "turns": [(t.index, t.rewards, t.env_messages, t.env_info) for t in record.turns],
            }
            for record in run.rollouts()
        }


def test_a_served_env_drives_the_same_turns_as_a_local_one(served, tmp_path, model):
    env_dir, data, url = served
    common = ["--base-url", model.base_url, "--no-progress", "--max-failure-rate", "1"]
    local = run_cli("eval", env_dir, "--data-dir", data, "--run-dir", tmp_path / "local", *common)
    remote = run_cli("eval", url, "--run-dir", tmp_path / "remote", *common)
    assert local.returncode == 0, local.stdout
    assert remote.returncode == 0, remote.stdout
    here, there = _records(tmp_path / "local"), _records(tmp_path / "remote")
    assert sorted(here) == sorted(there) and len(here) == len(ROWS)
    for rollout_id, record in here.items():
        other = there[rollout_id]
        for key in ("reason", "rewards", "messages", "turns"):
            assert other[key] == record[key], f"{rollout_id}: {key}\nlocal:  {record[key]}\nremote: {other[key]}"
    by_prompt = {record["messages"][0]["content"].split("\n")[0]: record for record in there.values()}
    assert by_prompt["game"]["reason"] == "finished"
    assert by_prompt["game"]["turns"] == [(0, {"step": 0.0}, 1, "say"), (1, {"step": 1.0}, 1, "done")]
    assert by_prompt["endless"]["reason"] == "max_turns_exceeded"
    for name, detail in (("crash", "raised ValueError"), ("junk", "returned tuple"), ("nan", "non-finite")):
        record = by_prompt[name]
        assert record["reason"] == "env_response_error", record
        assert detail in record["error"]
        assert "env.py:" in record["error"]  # where the served env's hook is
    assert "the board is broken" in by_prompt["crash"]["error"]
