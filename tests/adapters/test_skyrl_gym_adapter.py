"""``skyrl-gym:ENV_ID``: SkyRL-Gym envs over their rows, rewarded by the env's own ``step``.

SkyRL-Gym ships envs, not a runner (SkyRL's trainer drives them): its episode is
``make(env_class, env_config, extras=row)``, ``init(prompt)``, the model's answer, ``step(answer)``.
The test runs that episode itself for every row against the scripted server, then ``benchmax eval``
on the same rows and server, and compares the rewards row by row: SkyRL-Gym's own ``gsm8k`` and an
env the test writes and registers.
"""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("skyrl_gym", reason="pip install 'benchmax[adapters]'")

import skyrl_gym
from runkit import cli_env, run_cli

from benchmax import open_run
from benchmax.testing import ScriptedServer

WORDS_ENV = '''
import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput


class WordBudget(BaseTextEnv):
    """Reward 1 for an answer of at most `budget` words, falling by 0.25 per word over; a system prompt from init."""

    def __init__(self, env_config=None, extras={}):
        super().__init__()
        self.budget = int(extras["reward_spec"]["budget"])
        self.style = (env_config or {}).get("style", "plain")

    def init(self, prompt):
        return [{"role": "system", "content": f"Answer in {self.budget} words, {self.style}."}, *prompt], {}

    def step(self, action):
        over = max(0, len(action.split()) - self.budget)
        return BaseTextEnvStepOutput(observations=[], reward=max(0.0, 1.0 - 0.25 * over), done=True, metadata={})


if "word_budget" not in skyrl_gym.registry:
    skyrl_gym.register(id="word_budget", entry_point="skyrl_test_envs:WordBudget")
'''

GSM8K_ROWS = [
    {"prompt": [{"role": "user", "content": f"What is {a}+{a}? End with #### N"}], "env_class": "gsm8k",
     "reward_spec": {"method": "rule", "ground_truth": str(2 * a)}, "extra_info": {"index": a}}
    for a in range(5)
]  # fmt: skip
WORD_ROWS = [
    {"prompt": [{"role": "user", "content": f"Describe item {i}."}], "reward_spec": {"budget": 3}, "data_source": "t"}
    for i in range(5)
]


def policy(body: dict) -> dict:
    """gsm8k: right for even numbers, wrong for odd ones; word budget: i + 1 words for item i."""
    text = body["messages"][-1]["content"]
    if text.startswith("What is "):
        a = int(text.removeprefix("What is ").split("+")[0])
        return {"content": f"Adding. #### {2 * a + a % 2}"}
    item = int(text.removeprefix("Describe item ").rstrip("."))
    return {"content": " ".join(["word"] * (item + 1))}


def skyrl_episode_rewards(env_id: str, rows: list[dict], server: ScriptedServer, env_config: dict) -> dict[str, float]:
    """Each row's episode as SkyRL's generator runs a one-step one, keyed by the prompt's last message."""
    rewards = {}
    with httpx.Client(timeout=30) as client:
        for row in rows:
            extras = {key: value for key, value in row.items() if key not in ("prompt", "env_class")}
            env = skyrl_gym.make(env_id, env_config=env_config, extras=extras)
            chat, _ = env.init(list(row["prompt"]))
            reply = client.post(f"{server.base_url}/chat/completions", json={"model": "scripted", "messages": chat})
            out = env.step(reply.json()["choices"][0]["message"]["content"])
            env.close()
            assert out["done"]
            rewards[row["prompt"][-1]["content"]] = float(out["reward"])
    return rewards


@pytest.mark.parametrize(
    ("env_id", "rows", "env_config", "extra"),
    [
        ("gsm8k", GSM8K_ROWS, {}, []),
        ("word_budget", WORD_ROWS, {"style": "terse"}, ["--env-arg", "module=skyrl_test_envs",
                                                         "--env-arg", 'env_config={"style": "terse"}']),
    ],
)  # fmt: skip
def test_every_row_gets_the_reward_skyrl_gyms_own_episode_gives(tmp_path, monkeypatch, env_id, rows, env_config, extra):
    (tmp_path / "skyrl_test_envs.py").write_text(WORDS_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    import skyrl_test_envs  # noqa: F401 (registers word_budget in this process too)

    data = tmp_path / "data"
    data.mkdir()
    (data / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    env = cli_env(PYTHONPATH=f"{tmp_path}:{cli_env().get('PYTHONPATH', '')}")
    with ScriptedServer(policy) as server:
        expected = skyrl_episode_rewards(env_id, rows, server, env_config)
        episode_prompts = [request["messages"] for request in server.requests]
        server.requests.clear()
        result = run_cli(
            "eval", f"skyrl-gym:{env_id}", *extra, "--data-dir", data, "--split", "eval", "--base-url",
            server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run", env=env,
        )  # fmt: skip
        benchmax_prompts = [request["messages"] for request in server.requests]
    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        got = {record.messages[-2]["content"]: record.rewards["reward"] for record in run.rollouts()}
    assert got == expected
    assert len(set(expected.values())) >= 2
    assert sorted(map(json.dumps, benchmax_prompts)) == sorted(map(json.dumps, episode_prompts))


def test_an_unknown_env_id_lists_the_registered_ones_with_exit_2(tmp_path):
    result = run_cli(
        "eval", "skyrl-gym:nope", "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
        "--run-dir", tmp_path / "run", env=cli_env(),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert "SkyRL-Gym has no env 'nope'" in result.stdout and "gsm8k" in result.stdout


def test_a_multi_step_env_is_refused_before_any_rollout(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    row = {**GSM8K_ROWS[0], "env_class": "gsm8k_multi_turn", "extra_info": {"max_turns": 3}}
    (data / "eval.jsonl").write_text(json.dumps(row) + "\n")
    with ScriptedServer(policy) as server:
        result = run_cli(
            "eval", "skyrl-gym:gsm8k_multi_turn", "--data-dir", data, "--base-url", server.base_url,
            "--model", "scripted", "--run-dir", tmp_path / "run", env=cli_env(),
        )  # fmt: skip
        assert not server.requests
    assert result.returncode == 2, result.stdout
    assert "multi-step episode" in " ".join(result.stdout.split())


async def test_rows_are_read_from_a_parquet_file_in_the_data_directory(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pip install 'benchmax[export]'")
    import pyarrow

    from benchmax.loading import EnvSpec

    pq.write_table(pyarrow.Table.from_pylist(GSM8K_ROWS[:3]), tmp_path / "validation.parquet")
    env = EnvSpec("skyrl-gym:gsm8k").load()
    dataset = await env.create_dataset("eval", tmp_path)
    assert [example.payload["prompt_messages"] for example in dataset] == [row["prompt"] for row in GSM8K_ROWS[:3]]
    missing = r"no train rows in .*\(train.jsonl\|.parquet\); pass --env-arg rows=FILE"
    with pytest.raises(FileNotFoundError, match=missing):
        await env.create_dataset("train", tmp_path)


def test_validate_and_rescore_take_a_skyrl_gym_spec(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "eval"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in GSM8K_ROWS))
    checked = run_cli("validate", "skyrl-gym:gsm8k", "--data-dir", data, env=cli_env())
    assert checked.returncode == 0, checked.stdout
    with ScriptedServer(policy) as server:
        ran = run_cli(
            "eval", "skyrl-gym:gsm8k", "--data-dir", data, "--base-url", server.base_url, "--model", "scripted",
            "--run-dir", tmp_path / "run", env=cli_env(),
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout
    rescored = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "again", env=cli_env())
    assert rescored.returncode == 0, rescored.stdout
    with open_run(tmp_path / "run") as first, open_run(tmp_path / "again") as again:
        before = {r.example_id: r.rewards for r in first.rollouts()}
        after = {r.example_id: r.rewards for r in again.rollouts()}
    assert after == before and sorted(v["reward"] for v in before.values()) == [0.0, 0.0, 1.0, 1.0, 1.0]
