"""``verifiers:TASKSET_ID``: single-turn verifiers 0.4 tasksets, scored by the task's own ``Task.score``.

The test writes a taskset package (two weighted rewards and a metric), runs it with verifiers' own
runner (``load_environment``, ``serving()``, ``run_slot``: its interception server records the trace,
its ``null`` harness's chat program asks the model, the task scores) against a scripted server, then
``benchmax eval`` against the same server, and compares every task's rewards.

verifiers' runtime prepares the ``null`` harness's chat program with ``uv`` (it downloads uv and the
program's packages at run time). Tests reach only loopback, so a ``uv`` stand-in on ``PATH`` answers
``uv sync --script`` with nothing to do and ``uv python find --script`` with this interpreter, which
already has every package the program declares. The program that runs is verifiers' own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="pip install 'benchmax[adapters]'")

from runkit import cli_env, run_cli

from benchmax import open_run
from benchmax.testing import ScriptedServer

TASKSET = """
import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=2.0)
    async def correct(self, task, trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def brief(self, trace) -> float:
        return float(len(trace.last_reply) <= 2)

    @vf.metric
    async def turns(self, trace) -> float:
        return float(trace.num_turns)


class SumConfig(vf.TasksetConfig):
    count: int = 6


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self):
        for a in range(self.config.count):
            data = SumData(
                id=f"sum-{a}", prompt=f"What is {a} + {a + 1}?", system_prompt="Answer with the number.",
                answer=str(2 * a + 1),
            )
            yield SumTask(data, self.config.task)


__all__ = ["SumTaskset"]
"""

UV_STANDIN = f"""#!/bin/sh
# uv sync --help / uv python find --help: say the --script option is there
case "$*" in
  *--help*) echo "--script"; exit 0 ;;
  "sync --script"*) exit 0 ;;
  "python find --script"*) echo "{sys.executable}"; exit 0 ;;
esac
echo "uv stand-in: unexpected $*" >&2
exit 2
"""


def sums_policy(body: dict) -> dict:
    """Right and brief for even a, wordy (so not the answer) for a = 1, wrong but brief for the rest."""
    text = body["messages"][-1]["content"]
    if not text.startswith("What is "):
        return {"content": "<answer>0</answer>"}  # another env's question in a mixture
    a = int(text.removeprefix("What is ").split(" + ")[0])
    if a % 2 == 0:
        return {"content": str(2 * a + 1)}
    if a == 1:
        return {"content": "The sum is 3"}
    return {"content": str(2 * a)}


@pytest.fixture
def taskset_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's taskset package, importable here and in benchmax's subprocess; ``uv`` is the stand-in."""
    package = tmp_path / "plugins" / "vf_sums"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(TASKSET))
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "uv").write_text(UV_STANDIN)
    (tools / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.syspath_prepend(str(package.parent))
    return package.parent


async def verifiers_rewards(server: ScriptedServer) -> dict[str, dict[str, tuple[float, float]]]:
    """Each task's rewards ((score, weight) by name) as verifiers' own runner records them."""
    import verifiers.v1 as vf
    from verifiers.v1.clients import EvalClientConfig, ModelContext
    from verifiers.v1.envs.single_agent import SingleAgentEnvConfig
    from verifiers.v1.runtimes import SubprocessConfig

    config = SingleAgentEnvConfig.model_validate(
        {"taskset": {"id": "vf_sums"}, "agent": {"harness": {"id": "null"}, "runtime": SubprocessConfig()}}
    )
    env = vf.load_environment(config)
    ctx = ModelContext(model="scripted", client=EvalClientConfig(base_url=server.base_url, api_key_var="BENCHMAX_VF"))
    rewards: dict[str, dict[str, tuple[float, float]]] = {}
    async with env.serving():
        for task in env.taskset:
            for slot in env.slots(task):
                (trace,) = (await env.run_slot(slot, ctx)).traces
                assert trace.ok, trace.errors
                rewards[task.data.id] = {name: (r.score, r.weight) for name, r in trace.rewards.items()}
                rewards[task.data.id]["="] = (trace.reward, 1.0)
    return rewards


async def test_every_task_scores_what_verifiers_own_runner_gives(tmp_path, taskset_path, monkeypatch):
    monkeypatch.setenv("BENCHMAX_VF", "sk-test")
    with ScriptedServer(sums_policy) as server:
        expected = await verifiers_rewards(server)
        verifiers_requests = [request["messages"] for request in server.requests]
        del server.requests[:]
        pythonpath = os.pathsep.join([str(taskset_path), os.environ.get("PYTHONPATH", "")])
        result = run_cli(
            "eval", "verifiers:vf_sums", "--split", "eval", "--base-url", server.base_url, "--model", "scripted",
            "--run-dir", tmp_path / "run", env=cli_env(PYTHONPATH=pythonpath), timeout=120,
        )  # fmt: skip
        benchmax_requests = [request["messages"] for request in server.requests]
    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        got = {record.example_id: dict(record.rewards) for record in run.rollouts()}
    assert set(got) == set(expected) == {f"sum-{a}" for a in range(6)}
    for task_id, rewards in expected.items():
        total = rewards.pop("=")[0]
        assert got[task_id] == {name: score * weight for name, (score, weight) in rewards.items()}, task_id
        assert sum(got[task_id].values()) == pytest.approx(total), task_id
    assert {tuple(sorted(r.items())) for r in got.values()} == {
        (("brief", 0.5), ("correct", 2.0)),
        (("brief", 0.0), ("correct", 0.0)),
        (("brief", 0.5), ("correct", 0.0)),
    }
    assert sorted(map(str, benchmax_requests)) == sorted(map(str, verifiers_requests))


USER_SIM = """
from verifiers.v1.envs.user_sim import UserSimEnv

__all__ = ["SumTaskset", "UserSimEnv"]
"""
OWN_HARNESS = """
from verifiers.v1.harnesses.null import NullHarness


class EchoHarness(NullHarness):
    pass


__all__ = ["SumTaskset", "EchoHarness"]
"""
TOOLS = """
class Search:
    pass


SumTaskset.toolsets = classmethod(lambda cls, config: [Search()])
"""
RUNTIME_REWARD = """
@vf.reward
async def exit_code(self, runtime) -> float:
    return 1.0


SumTask.exit_code = exit_code
"""


def write_taskset(root: Path, name: str, extra: str) -> None:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(TASKSET) + textwrap.dedent(extra))


def test_a_multi_turn_verifiers_env_is_refused_with_exit_2_and_the_reason(tmp_path):
    write_taskset(tmp_path, "vf_chat_sim", USER_SIM)
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result = run_cli(
        "eval", "verifiers:vf_chat_sim", "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
        "--run-dir", tmp_path / "run", env=cli_env(PYTHONPATH=pythonpath),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    said = " ".join(result.stdout.split())
    assert "runs as UserSimEnv" in said and "single-turn verifiers envs only" in said


@pytest.mark.parametrize(
    ("name", "extra", "message"),
    [
        ("vf_own_harness", OWN_HARNESS, "bundles its own harness"),
        ("vf_tools", TOOLS, "gives the model tools (Search)"),
        ("vf_runtime_reward", RUNTIME_REWARD, "exit_code need(s) the task's runtime"),
        ("vf_no_such_taskset", None, "taskset 'vf_no_such_taskset' not found"),
    ],
)
async def test_what_a_single_chat_cannot_play_is_refused_before_any_rollout(
    tmp_path, monkeypatch, name, extra, message
):
    from benchmax.envs import EnvSpecError
    from benchmax.loading import EnvSpec

    if extra is not None:
        write_taskset(tmp_path, name, extra)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EnvSpecError) as refused:
        env = EnvSpec(f"verifiers:{name}").load()
        await env.create_dataset("eval", tmp_path)
    assert message in str(refused.value)


def test_a_verifiers_taskset_mixes_rescores_as_it_is_now_and_validates(tmp_path, taskset_path):
    pytest.importorskip("reasoning_gym", reason="pip install 'benchmax[gallery]'")
    env = cli_env(PYTHONPATH=os.pathsep.join([str(taskset_path), os.environ.get("PYTHONPATH", "")]))
    with ScriptedServer(sums_policy) as server:
        mixed = run_cli(
            "eval", "verifiers:vf_sums", "reasoning-gym:chain_sum", "--env-arg", "vf_sums:taskset={\"count\": 3}",
            "--env-arg", "chain_sum:size=2", "--base-url", server.base_url, "--model", "scripted",
            "--run-dir", tmp_path / "run", env=env, timeout=120,
        )  # fmt: skip
    assert mixed.returncode == 0, mixed.stdout
    with open_run(tmp_path / "run") as run:
        records = list(run.rollouts())
    sums = {r.example_id: dict(r.rewards) for r in records if r.env == "vf_sums"}
    assert sums == {
        "vf_sums/sum-0": {"correct": 2.0, "brief": 0.5},
        "vf_sums/sum-1": {"correct": 0.0, "brief": 0.0},
        "vf_sums/sum-2": {"correct": 2.0, "brief": 0.5},
    }
    assert len([r for r in records if r.env == "chain_sum"]) == 2

    # The task's weight changes: rescoring runs Task.score as the taskset is now, with no model call.
    package = taskset_path / "vf_sums" / "__init__.py"
    package.write_text(package.read_text().replace("@vf.reward(weight=2.0)", "@vf.reward(weight=3.0)"))
    rescored = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "rescored", env=env, timeout=120)
    assert rescored.returncode == 0, rescored.stdout
    with open_run(tmp_path / "rescored") as run:
        now = {r.example_id: dict(r.rewards) for r in run.rollouts() if r.env == "vf_sums"}
    assert now == {key: {**value, "correct": value["correct"] * 1.5} for key, value in sums.items()}

    validated = run_cli("validate", "verifiers:vf_sums", env=env, timeout=120)
    assert validated.returncode == 0, validated.stdout


def test_train_takes_a_verifiers_taskset(tmp_path, taskset_path):
    pytest.importorskip("trl", reason="pip install 'benchmax[train]'")
    from benchmax.train.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    env = cli_env(PYTHONPATH=os.pathsep.join([str(taskset_path), os.environ.get("PYTHONPATH", "")]))
    completed = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "train", "--env", "verifiers:vf_sums", "--model", str(model),
            "--run-dir", str(tmp_path / "train"), "--max-steps", "1", "--group-size", "2", "--prompts-per-step", "2",
            "--max-tokens", "4", "--threads", "1",
        ],
        capture_output=True, text=True, timeout=280, env=env,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    with open_run(tmp_path / "train") as run:
        records = list(run.rollouts())
    assert records and {record.env for record in records} == {"vf_sums"}
    assert all(set(record.rewards) == {"correct", "brief"} for record in records if record.rewards)


OLD_VERIFIERS = """
import importlib.abc, sys

class NoV1(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "verifiers.v1" or name.startswith("verifiers.v1."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoV1())
"""


def test_a_verifiers_without_the_v1_api_is_refused_with_exit_2_naming_its_version(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(OLD_VERIFIERS)
    result = run_cli(
        "eval", "verifiers:vf_sums", "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
        "--run-dir", tmp_path / "run",
        env=cli_env(PYTHONPATH=os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    said = " ".join(result.stdout.split())
    import verifiers

    assert f"verifiers {verifiers.__version__} is installed" in said
    assert "the older load_environment API is not mapped: pip install 'benchmax[adapters]'" in said
    assert "Traceback" not in result.stdout


def test_a_run_is_named_after_the_taskset_without_a_hub_owner_or_version():
    from benchmax.adapters import adapter_env_name

    assert adapter_env_name("verifiers:acme/vf_sums@0.2") == adapter_env_name("verifiers:vf_sums") == "vf_sums"
