"""HarborEnv on real Harbor trials: tasks made here, agents Harbor ships or the tests bundle, the local sandbox.

Every trial runs through Harbor's own ``Trial`` (agent setup, agent run,
verifier, artifact collection) with ``LocalSandboxEnvironment`` underneath: a
real bubblewrap sandbox per trial. A model-driven agent talks to a real
loopback model server.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import uuid
from pathlib import Path

import pytest

pytest.importorskip("harbor", reason="the harbor package needs Python >= 3.12; CI runs these in its 3.13 environment")

from harbor.models.environment_type import EnvironmentType
from harbor.models.job.config import DatasetConfig
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

from benchmax.envs import RolloutRequest, StaticBearerAuth
from benchmax.envs.harbor import (
    LOCAL_SANDBOX,
    BundledAgentSource,
    BundledHarborAgent,
    CustomSandboxCredentials,
    DaytonaCredentials,
    HarborEnv,
    HarborTrialTemplate,
    ModalCredentials,
)
from benchmax.testing import ScriptedServer

AGENTS = Path(__file__).resolve().parent / "agents"


def template(tmp_path: Path, agent, **fields) -> HarborTrialTemplate:
    return HarborTrialTemplate(
        agent=agent,
        environment=fields.pop("environment", EnvironmentConfig(import_path=LOCAL_SANDBOX)),
        verifier=VerifierConfig(),
        trials_dir=tmp_path / "trials",
        **fields,
    )


def make_env(tasks: Path, tmp_path: Path, agent=None, **options) -> HarborEnv:
    return HarborEnv(
        dataset=DatasetConfig(path=tasks),
        trial=options.pop("trial", None) or template(tmp_path, agent or AgentConfig(name="oracle")),
        eval_ratio=options.pop("eval_ratio", 0),
        **options,
    )


async def by_name(env: HarborEnv, tmp_path: Path) -> dict:
    dataset = await env.create_dataset("train", tmp_path / "data")
    return {example.payload["task_name"]: example for example in dataset}


async def run(env: HarborEnv, example, base_url: str = "http://127.0.0.1:9/v1", **fields):
    request = RolloutRequest(f"r-{uuid.uuid4().hex[:8]}", example, "scripted", base_url, **fields)
    return (await env.run_group([request]))[request.rollout_id]


async def test_the_oracle_solves_each_task_in_the_local_sandbox_and_the_verifiers_rewards_come_back(tasks, tmp_path):
    secret = Path.home() / ".benchmax-harbor-secret"
    secret.write_text("do not read me")
    try:
        env = make_env(tasks, tmp_path)
        examples = await by_name(env, tmp_path)
        outcomes = {name: await run(env, example) for name, example in examples.items()}
    finally:
        secret.unlink()
    assert outcomes["hello"].rewards == {"reward": 1.0}
    assert outcomes["answer"].rewards == {"correct": 1.0, "style": 0.5}
    assert outcomes["walls"].rewards == {"reward": 1.0}, "the sandbox let the task read the host home or the network"
    for name, outcome in outcomes.items():
        assert outcome.termination_reason == "finished", (name, outcome.error)
        assert outcome.example_id == examples[name].id
        assert outcome.messages[0]["content"].startswith(examples[name].payload["prompt_messages"][0]["content"][:20])


async def test_an_agent_that_does_nothing_scores_zero(tasks, tmp_path):
    env = make_env(tasks, tmp_path, AgentConfig(name="nop"))
    outcome = await run(env, (await by_name(env, tmp_path))["hello"])
    assert (outcome.termination_reason, outcome.rewards) == ("finished", {"reward": 0.0})


def shell_agent() -> BundledHarborAgent:
    source = BundledAgentSource.from_directory(AGENTS, files=["shell_agent.py"])
    return BundledHarborAgent(config=AgentConfig(import_path="shell_agent:ShellAgent"), source=source)


def shell_policy(command: str):
    """A model that runs ``command`` once, then answers."""

    def policy(body):
        done = any(message["role"] == "tool" for message in body["messages"])
        return {"content": "done"} if done else {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}

    return policy


async def test_a_model_driven_agent_reaches_the_rollouts_endpoint_and_its_commands_run_in_the_sandbox(tasks, tmp_path):
    agent = shell_agent()
    env = make_env(tasks, tmp_path, agent)
    hello = (await by_name(env, tmp_path))["hello"]
    with ScriptedServer(shell_policy("echo 'Hello, world!' > hello.txt; id -u")) as server:
        outcome = await run(env, hello, server.base_url, model_auth=StaticBearerAuth("sk-rollout"))
        assert len(server.requests) == 2
    assert (outcome.termination_reason, outcome.rewards) == ("finished", {"reward": 1.0})
    seen = importlib.import_module(agent.harbor_config().import_path.split(":")[0]).SEEN[-1]
    assert seen["model"] == "openai/scripted"
    assert seen["base_url"] == server.base_url and seen["api_key"] == "sk-rollout"


async def test_a_wrong_answer_from_the_model_scores_zero_and_partial_components_survive(tasks, tmp_path):
    env = make_env(tasks, tmp_path, shell_agent())
    answer = (await by_name(env, tmp_path))["answer"]
    with ScriptedServer(shell_policy("echo 41 > answer.txt")) as server:
        outcome = await run(env, answer, server.base_url)
    assert outcome.rewards == {"correct": 0.0, "style": 0.5}


async def test_trials_are_capped_at_max_concurrent_trials(tasks, tmp_path):
    agent = shell_agent()
    env = make_env(tasks, tmp_path, agent, max_concurrent_trials=1)
    hello = (await by_name(env, tmp_path))["hello"]
    module = importlib.import_module(agent.harbor_config().import_path.split(":")[0])
    module.RUNNING[:] = [0, 0]
    with ScriptedServer(shell_policy("echo 'Hello, world!' > hello.txt")) as server:
        requests = [RolloutRequest(f"cap-{i}", hello, "scripted", server.base_url) for i in range(3)]
        outcomes = await env.run_group(requests)
    assert [outcome.rewards for outcome in outcomes.values()] == [{"reward": 1.0}] * 3
    assert module.RUNNING[1] == 1


async def test_sandbox_credentials_are_in_the_environment_during_trials_only(tasks, tmp_path, monkeypatch):
    monkeypatch.delenv("BENCHMAX_TEST_TOKEN", raising=False)
    agent = shell_agent()
    credentials = CustomSandboxCredentials({"BENCHMAX_TEST_TOKEN": "t0ken"}, provider=None)
    env = make_env(tasks, tmp_path, agent, sandbox_credentials=credentials)
    hello = (await by_name(env, tmp_path))["hello"]
    with ScriptedServer(shell_policy("echo $BENCHMAX_TEST_TOKEN > token.txt")) as server:
        await run(env, hello, server.base_url)
    seen = importlib.import_module(agent.harbor_config().import_path.split(":")[0]).SEEN[-1]
    assert seen["host_env"].get("BENCHMAX_TEST_TOKEN") == "t0ken"  # CI sets other BENCHMAX_TEST_ variables
    assert "BENCHMAX_TEST_TOKEN" not in os.environ


async def test_datasets_are_content_addressed_and_split_deterministically(tasks, tmp_path):
    env = make_env(tasks, tmp_path, eval_ratio=0.3)
    train = await env.create_dataset("train", tmp_path / "a")
    held_out = await env.create_dataset("eval", tmp_path / "a")
    assert len(train) == 2 and len(held_out) == 1
    everything = {example.id for example in await make_env(tasks, tmp_path).create_dataset("train", tmp_path / "c")}
    assert len(everything) == 3
    assert {example.id for example in train} | {example.id for example in held_out} == everything
    copy = tmp_path / "copy"
    shutil.copytree(tasks, copy)
    again = make_env(copy, tmp_path, eval_ratio=0.3)
    assert [example.id for example in await again.create_dataset("eval", tmp_path / "d")] == [held_out[0].id]
    limited = await make_env(tasks, tmp_path, eval_ratio=0.3).create_dataset("train", tmp_path / "e", max_examples=1)
    assert len(limited) == 1 and limited[0].id in {example.id for example in train}
    snapshot = Path(train[0].payload["task_path"])
    assert snapshot.name == train[0].id and (snapshot / "task.toml").is_file()


async def test_an_explicit_eval_dataset_wins_and_a_disabled_eval_split_says_so(tasks, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copytree(tasks / "hello", other / "hello")
    env = make_env(tasks, tmp_path, eval_dataset=DatasetConfig(path=other))
    assert [e.payload["task_name"] for e in await env.create_dataset("eval", tmp_path / "x")] == ["hello"]
    assert len(await env.create_dataset("train", tmp_path / "x")) == 3
    with pytest.raises(ValueError, match="eval_ratio=0"):
        await make_env(tasks, tmp_path, eval_ratio=0).create_dataset("eval", tmp_path / "y")


async def test_other_environment_types_go_to_harbor_unchanged(tasks, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    trial = template(tmp_path, AgentConfig(name="oracle"), environment=EnvironmentConfig(type=EnvironmentType.DOCKER))
    env = make_env(tasks, tmp_path, trial=trial)
    outcome = await run(env, (await by_name(env, tmp_path))["hello"])
    # Harbor's Docker environment ran the trial: it failed to reach the daemon named above
    assert outcome.rewards == {} and outcome.termination_reason in ("harness_error", "sandbox_error")
    assert "docker" in (outcome.error or "").lower()


def test_the_configuration_is_checked_at_construction_with_the_fix_named(tasks, tmp_path):
    oracle = AgentConfig(name="oracle")
    with pytest.raises(ValueError, match="model_name must be unset"):
        make_env(tasks, tmp_path, AgentConfig(name="oracle", model_name="x"))
    with pytest.raises(ValueError, match="n_concurrent"):
        make_env(tasks, tmp_path, AgentConfig(name="oracle", n_concurrent=2))
    with pytest.raises(ValueError, match="verifier enabled"):
        HarborEnv(
            dataset=DatasetConfig(path=tasks),
            trial=HarborTrialTemplate(
                agent=oracle, environment=EnvironmentConfig(), verifier=VerifierConfig(disable=True)
            ),
        )
    modal = template(tmp_path, oracle, environment=EnvironmentConfig(type=EnvironmentType.MODAL))
    with pytest.raises(ValueError, match="needs sandbox_credentials"):
        make_env(tasks, tmp_path, trial=modal)
    with pytest.raises(ValueError, match="do not match"):
        make_env(tasks, tmp_path, trial=modal, sandbox_credentials=DaytonaCredentials(api_key="k"))
    with_modal = make_env(
        tasks, tmp_path, trial=modal, sandbox_credentials=ModalCredentials(token_id="i", token_secret="s")
    )
    assert with_modal._trial.environment.kwargs["app_name"] == "harbor-benchmax"
    with pytest.raises(ValueError, match="eval_ratio"):
        make_env(tasks, tmp_path, eval_ratio=1.0)
    with pytest.raises(ValueError, match="max_concurrent_trials"):
        make_env(tasks, tmp_path, max_concurrent_trials=0)
    with pytest.raises(TypeError, match="DatasetConfig"):
        HarborEnv(dataset={"path": str(tasks)}, trial=template(tmp_path, oracle))
    with pytest.raises(ValueError, match="positive"):
        template(tmp_path, oracle, timeout_multiplier=0)


def test_harness_model_controls_are_reported(tasks, tmp_path):
    agent = AgentConfig(name="oracle", kwargs={"temperature": 0.7, "max_tokens": 100, "llm": {"n": 4}})
    diagnostics = make_env(tasks, tmp_path, agent).validation_diagnostics()
    assert {(d.severity, d.code, d.location) for d in diagnostics} == {
        ("error", "trainer_owned_model_control", "agent.kwargs.temperature"),
        ("warning", "harness_output_cap", "agent.kwargs.max_tokens"),
        ("error", "unsupported_model_control", "agent.kwargs.llm.n"),
    }


def test_credentials_validate_and_never_show_their_secrets():
    modal = ModalCredentials(token_id="id-1", token_secret="secret-1")
    assert "secret-1" not in repr(modal) and modal.host_environment()["MODAL_TOKEN_SECRET"] == "secret-1"
    assert DaytonaCredentials(jwt_token="j", organization_id="o", target="eu").host_environment() == {
        "DAYTONA_JWT_TOKEN": "j", "DAYTONA_ORGANIZATION_ID": "o", "DAYTONA_TARGET": "eu",
    }  # fmt: skip
    with pytest.raises(ValueError, match="either api_key"):
        DaytonaCredentials(api_key="k", jwt_token="j")
    with pytest.raises(ValueError, match="non-empty"):
        ModalCredentials(token_id="", token_secret="s")
    with pytest.raises(ValueError, match="at least one"):
        CustomSandboxCredentials({})


def test_bundled_agents_capture_their_files_and_refuse_unsafe_ones(tmp_path):
    source = BundledAgentSource.from_directory(AGENTS, files=["shell_agent.py"])
    same = BundledAgentSource.from_files({"shell_agent.py": (AGENTS / "shell_agent.py").read_bytes()})
    assert source.content_id == same.content_id and source.content_id.startswith("sha256:")
    with pytest.raises(ValueError, match="relative POSIX"):
        BundledAgentSource.from_files({"../x.py": b""})
    with pytest.raises(ValueError, match="not among its files"):
        BundledHarborAgent(config=AgentConfig(import_path="other:Agent"), source=source)
    with pytest.raises(ValueError, match="import_path and no name"):
        BundledHarborAgent(config=AgentConfig(name="oracle"), source=source)
    module = shell_agent().harbor_config().import_path
    assert module.startswith("_benchmax_harbor_agent_") and module.endswith(".shell_agent:ShellAgent")


async def test_concurrent_rollouts_run_in_separate_sandboxes(tasks, tmp_path):
    env = make_env(tasks, tmp_path, shell_agent())
    hello = (await by_name(env, tmp_path))["hello"]
    with ScriptedServer(shell_policy("echo 'Hello, world!' > hello.txt; ls /app")) as server:
        requests = [RolloutRequest(f"par-{i}", hello, "scripted", server.base_url) for i in range(3)]
        outcomes = await asyncio.wait_for(env.run_group(requests), 300)
    assert [outcome.rewards for outcome in outcomes.values()] == [{"reward": 1.0}] * 3
