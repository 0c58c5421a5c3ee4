"""Every run records what made it: benchmax, the env, hashes of its code and data, git, model, endpoint, sampling.

The env lives in a real git repository the test makes; runs are real evals
against the scripted server, their provenance read back from the run store.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from runkit import ENV_FILE, row, write_split

from benchmax import __version__, open_run
from benchmax.envs import SamplingParams
from benchmax.runner import RunConfig, RunOrigin, arun, run_provenance
from benchmax.store import provenance_changes

ROWS = [row("4", "right"), row("x", "wrong", answers=["y"])]
SECRET = "sk-provenance-secret-0123456789"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed on this machine")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed repository holding the env file and its data."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "env.py").write_text(ENV_FILE.read_text())
    (root / "helpers.py").write_text("WEIGHT = 1.0\n")
    write_split(root / "data", ROWS)
    (root / ".gitignore").write_text("__pycache__/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "env")
    return root


async def run_in(repo: Path, run_dir: Path, base_url: str, **extra: object) -> dict:
    config = RunConfig(
        env=f"{repo / 'env.py'}:ScoredEnv", data_dir=repo / "data", base_url=base_url, model="scripted",
        run_dir=run_dir, **extra,
    )  # fmt: skip
    await arun(config)
    with open_run(run_dir) as run:
        return dict(run.meta)


async def test_an_eval_records_env_code_data_git_model_endpoint_and_sampling(repo, tmp_path, server, monkeypatch):
    monkeypatch.setenv("PROVENANCE_TEST_KEY", SECRET)
    sampling = SamplingParams(temperature=0.5, seed=7, max_tokens=32)

    meta = await run_in(repo, tmp_path / "run", server.base_url, sampling=sampling, api_key_env="PROVENANCE_TEST_KEY")
    provenance = meta["provenance"]

    assert provenance["benchmax"] == __version__
    assert provenance["env"]["kind"] == "file"
    assert provenance["env"]["path"] == str((repo / "env.py").resolve())
    code = provenance["code"]
    assert code["digests"]["env.py"] == hashlib.sha256((repo / "env.py").read_bytes()).hexdigest()[:16]
    assert "helpers.py" in code["digests"] and code["files"] == 2 and code["truncated"] is False
    [data] = provenance["data"]["files"]
    assert data["path"] == str((repo / "data" / "eval.jsonl").resolve())
    assert data["sha256"] == hashlib.sha256((repo / "data" / "eval.jsonl").read_bytes()).hexdigest()
    assert provenance["git"] == {"commit": git(repo, "rev-parse", "HEAD"), "dirty": False,
                                 "repository": str(repo.resolve())}  # fmt: skip
    assert provenance["model"] == "scripted"
    assert provenance["endpoint"] == server.base_url
    assert provenance["sampling"] == {"temperature": 0.5, "seed": 7, "max_tokens": 32}
    stored = json.dumps(meta)
    assert SECRET not in stored, "the API key reached the run store"


def test_endpoints_are_recorded_without_user_info_query_or_fragment():
    url = "https://someone:hunter2@models.example.com:8443/v1?api_key=abc#frag"

    provenance = run_provenance(RunOrigin(endpoint=[url, "http://[::1]:9000/v1"])).to_json()  # as stored

    assert provenance["endpoint"] == ["https://models.example.com:8443/v1", "http://[::1]:9000/v1"]


async def test_uncommitted_env_edits_show_as_dirty_and_as_a_code_change(repo, tmp_path, server):
    first = (await run_in(repo, tmp_path / "a", server.base_url))["provenance"]
    (repo / "helpers.py").write_text("WEIGHT = 2.0\n")
    second = (await run_in(repo, tmp_path / "b", server.base_url))["provenance"]

    assert (first["git"]["dirty"], second["git"]["dirty"]) == (False, True)
    changes = provenance_changes(first, second)
    [code] = [change for change in changes if change.aspect == "code"]
    assert code.warning and "changed: helpers.py" in code.text
    assert not any(change.aspect == "data" for change in changes)


async def test_changed_data_is_a_warning_and_same_code_and_data_are_not(repo, tmp_path, server):
    first = (await run_in(repo, tmp_path / "a", server.base_url))["provenance"]
    again = (await run_in(repo, tmp_path / "b", server.base_url))["provenance"]
    write_split(repo / "data", [*ROWS, row("5", "another")])
    changed = (await run_in(repo, tmp_path / "c", server.base_url))["provenance"]

    assert [change for change in provenance_changes(first, again) if change.warning] == []
    [data] = [change for change in provenance_changes(first, changed) if change.warning]
    assert data.aspect == "data" and "changed: eval.jsonl" in data.text


async def test_an_env_outside_any_repository_records_no_git(tmp_path, server):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "env.py").write_text(ENV_FILE.read_text())
    write_split(plain / "data", ROWS)
    if subprocess.run(["git", "rev-parse"], cwd=plain, capture_output=True).returncode == 0:
        pytest.skip("the temporary directory lies inside a git repository on this machine")

    provenance = (await run_in(plain, tmp_path / "run", server.base_url))["provenance"]

    assert provenance["git"] is None
    assert provenance["code"]["sha256"]


def test_runs_from_before_provenance_are_a_note_not_a_warning():
    [change] = provenance_changes(None, {"benchmax": __version__})

    assert (change.aspect, change.warning) == ("missing", False)
    assert "run A recorded no provenance" in change.text


HF_ENV = '''
from benchmax.envs import BaseEnv
from benchmax.hf import HFDataset
from benchmax.rewards import extract_completion_text


class ShardEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return HFDataset("shard-*.parquet", lambda row: {"prompt_messages": row["prompt"], "answer": row["answer"]},
                         max_examples, base_dir=base_dir)

    async def compute_reward(self, rollout):
        return {"correct": float(extract_completion_text(rollout.messages).strip() == rollout.example_args["answer"])}
'''


async def test_an_env_on_hf_datasets_records_each_file_it_reads(tmp_path, server):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    (tmp_path / "env.py").write_text(HF_ENV)
    for shard, item in enumerate(ROWS):
        table = pa.Table.from_pylist([{"prompt": item["prompt_messages"], "answer": item["answer"]}])
        pq.write_table(table, tmp_path / f"shard-{shard}.parquet")
    config = RunConfig(env=f"{tmp_path / 'env.py'}:ShardEnv", base_url=server.base_url, model="scripted",
                       run_dir=tmp_path / "run")  # fmt: skip
    await arun(config)
    with open_run(tmp_path / "run") as run:
        data = run.meta["provenance"]["data"]
        rewards = sorted(record.rewards["correct"] for record in run.rollouts())

    assert rewards == [0.0, 1.0]
    assert data["source"] == "HFDataset" and data["count"] == 2
    assert [(Path(entry["path"]).name, entry["sha256"]) for entry in data["files"]] == [
        (f"shard-{n}.parquet", hashlib.sha256((tmp_path / f"shard-{n}.parquet").read_bytes()).hexdigest())
        for n in range(2)
    ]


async def test_resuming_after_an_env_edit_warns_and_keeps_both_records(repo, tmp_path, server, caplog):
    config = RunConfig(env=f"{repo / 'env.py'}:ScoredEnv", data_dir=repo / "data", base_url=server.base_url,
                       model="scripted", run_dir=tmp_path / "run")  # fmt: skip
    await arun(config)
    with open_run(tmp_path / "run") as run:
        started = run.meta["provenance"]
    (repo / "helpers.py").write_text("WEIGHT = 3.0\n")

    with caplog.at_level("WARNING", logger="benchmax"):
        await arun(config, resume=True)

    with open_run(tmp_path / "run") as run:
        meta = dict(run.meta)
    assert meta["provenance"] == started, "the run keeps the provenance it started with"
    [resumed] = meta["provenance_resumes"]
    assert len(resumed["changes"]) == 1 and resumed["changes"][0].startswith("env code differs")
    assert resumed["provenance"]["git"]["dirty"] is True
    assert any("since the run started" in record.getMessage() for record in caplog.records)
