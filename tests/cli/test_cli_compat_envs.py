"""0.2.x envs from the CLI: their ``data/`` folder is found, and ``--auth`` binds ``InjectedAuth`` names.

Real subprocesses of ``benchmax`` against scripted servers on loopback: one plays
the policy, another the judge an env reaches through ``InjectedAuth("judge")``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runkit import cli_env, row, run_cli, write_split

from benchmax import open_run
from benchmax.testing import ScriptedServer

JUDGE_KEY = "sk-judge-7c0ffee-never-stored"

# As upstream's examples/math/main.py: a main.py whose data lives in data/ beside it,
# read from the base_dir its trainer passed.
OLD_STYLE_ENV = '''
from pathlib import Path
from benchmax.envs.base import BaseEnv, JsonlDataset

class OldStyleEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {"answered": float(bool(rollout.messages[-1].get("content")))}
'''

JUDGED_ENV = '''
from benchmax.auth import InjectedAuth
from benchmax.envs.base import BaseEnv, JsonlDataset
from benchmax.rewards import Judge

class JudgedEnv(BaseEnv):
    max_turns = 1

    def __init__(self, judge_base_url: str) -> None:
        super().__init__()
        self.judge = Judge(model="judge", base_url=judge_base_url, auth=InjectedAuth("judge"),
                           response_format="none", max_retries=0, auth_attempts=1)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {"preferred": await self.judge.compare(str(rollout.messages[-1].get("content")), "nothing")}
'''


def _judge_policy(body: dict) -> dict:
    return {"content": json.dumps({"reason": "A answers", "winner": "A"})}


def _old_style_env(root: Path, *, data: bool = True) -> Path:
    root.mkdir(parents=True)
    (root / "main.py").write_text(OLD_STYLE_ENV)
    if data:
        for split in ("train", "eval"):
            write_split(root / "data", [row("4", "what is 2+2")], split)
    return root


def test_validate_and_eval_find_a_0_2_x_env_s_data_folder(tmp_path, server):
    env_dir = _old_style_env(tmp_path / "math")

    checked = run_cli("validate", env_dir)
    ran = run_cli("eval", env_dir, "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run")

    assert checked.returncode == 0, checked.stdout
    assert f"eval: data read from {env_dir.resolve() / 'data'}" in checked.stdout
    assert ran.returncode == 0, ran.stdout
    with open_run(tmp_path / "run") as run:
        assert [dict(record.rewards) for record in run.rollouts()] == [{"answered": 1.0}]


def test_data_found_nowhere_names_every_place_looked(tmp_path):
    env_dir = _old_style_env(tmp_path / "math", data=False)

    result = run_cli("validate", env_dir)

    assert result.returncode == 1, result.stdout
    out = " ".join(result.stdout.split())
    assert "found no data in any of the places looked" in out
    assert f"{env_dir.resolve()} ({env_dir.resolve() / 'eval.jsonl'}: dataset file not found)" in out
    assert f"{env_dir.resolve() / 'data'} (no such directory)" in out
    assert "--data-dir" in out


@pytest.fixture
def judge():
    with ScriptedServer(policy=_judge_policy) as running:
        yield running


def _judged_env(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "env.py").write_text(JUDGED_ENV)
    for split in ("train", "eval"):
        write_split(root, [row("4", "what is 2+2")], split)
    return root


@pytest.mark.parametrize("form", ["default-variable", "named-variable"])
def test_auth_binds_injected_auth_for_eval_with_the_key_from_the_environment(tmp_path, server, judge, form):
    env_dir = _judged_env(tmp_path / "judged")
    if form == "default-variable":
        flag, variables = f"judge={judge.base_url}", {"BENCHMAX_AUTH_JUDGE_KEY": JUDGE_KEY}
    else:
        flag, variables = f"judge={judge.base_url}@MY_JUDGE_KEY", {"MY_JUDGE_KEY": JUDGE_KEY}

    result = run_cli(
        "eval", env_dir, "--env-arg", f"judge_base_url={judge.base_url}", "--auth", flag,
        "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
        env=cli_env(**variables),
    )  # fmt: skip

    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        assert [dict(record.rewards) for record in run.rollouts()] == [{"preferred": 1.0}]
    assert [headers.get("Authorization") for headers in judge.headers] == [f"Bearer {JUDGE_KEY}"]
    assert all(JUDGE_KEY not in headers.get("Authorization", "") for headers in server.headers)
    assert JUDGE_KEY not in result.stdout
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert JUDGE_KEY.encode() not in path.read_bytes(), path


def test_auth_binds_injected_auth_for_validate_and_rescore(tmp_path, server, judge):
    env_dir = _judged_env(tmp_path / "judged")
    common = ["--env-arg", f"judge_base_url={judge.base_url}"]
    variables = cli_env(BENCHMAX_AUTH_JUDGE_KEY=JUDGE_KEY)
    ran = run_cli(
        "eval", env_dir, *common, "--auth", f"judge={judge.base_url}", "--base-url", server.base_url,
        "--model", "scripted", "--run-dir", tmp_path / "run", env=variables,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout

    checked = run_cli("validate", env_dir, *common, "--auth", f"judge={judge.base_url}", env=variables)
    rescored = run_cli(
        "rescore", tmp_path / "run", "--run-dir", tmp_path / "again", "--auth", f"judge={judge.base_url}", env=variables
    )

    assert checked.returncode == 0, checked.stdout
    assert rescored.returncode == 0, rescored.stdout
    with open_run(tmp_path / "again") as run:
        assert [dict(record.rewards) for record in run.rollouts()] == [{"preferred": 1.0}]
    assert {headers.get("Authorization") for headers in judge.headers} == {f"Bearer {JUDGE_KEY}"}
    assert len(judge.headers) == 4  # eval, validate's train and eval examples, rescore


def test_auth_binds_injected_auth_on_ray_actors_for_eval_and_rescore(tmp_path, server, judge):
    """The binding is the driver's; the actors get it with the executor's configuration and read the
    key from their own environment (a local cluster inherits the driver's)."""
    env_dir = _judged_env(tmp_path / "judged")
    env_file = env_dir / "env.py"
    on_ray = '"on_ray": float(bool(__import__("ray").get_runtime_context().get_actor_id())), "preferred"'
    env_file.write_text(env_file.read_text().replace('"preferred"', on_ray))
    variables = cli_env(MY_JUDGE_KEY=JUDGE_KEY)
    flags = ["--auth", f"judge={judge.base_url}@MY_JUDGE_KEY", "--executor", "ray", "--workers", "1"]

    ran = run_cli(
        "eval", env_dir, "--env-arg", f"judge_base_url={judge.base_url}", *flags, "--base-url", server.base_url,
        "--model", "scripted", "--run-dir", tmp_path / "run", env=variables, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout
    rescored = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "again", *flags, env=variables, timeout=300)

    assert rescored.returncode == 0, rescored.stdout
    for run_dir in ("run", "again"):
        with open_run(tmp_path / run_dir) as run:
            assert [dict(record.rewards) for record in run.rollouts()] == [{"on_ray": 1.0, "preferred": 1.0}]
    assert [headers.get("Authorization") for headers in judge.headers] == [f"Bearer {JUDGE_KEY}"] * 2
    assert all(JUDGE_KEY not in str(headers) for headers in server.headers)
    assert JUDGE_KEY not in ran.stdout and JUDGE_KEY not in rescored.stdout
    for path in [*(tmp_path / "run").rglob("*"), *(tmp_path / "again").rglob("*")]:
        if path.is_file():
            assert JUDGE_KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("command", ["eval", "validate", "rescore", "train"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("judge", "write --auth NAME=URL or NAME=URL@VAR"),
        ("judge=not-a-url", "is not an http(s):// URL"),
        ("judge=http://127.0.0.1:9/v1", "environment variable BENCHMAX_AUTH_JUDGE_KEY is not set"),
    ],
    ids=["no-url", "bad-url", "unset-variable"],
)
def test_a_malformed_auth_or_a_missing_key_is_a_usage_error(tmp_path, command, value, message):
    target = tmp_path if command == "rescore" else tmp_path / "nowhere"
    result = run_cli(command, target, "--auth", value)

    assert result.returncode == 2, result.stdout
    assert message in " ".join(result.stdout.split())
