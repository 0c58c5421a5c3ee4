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
