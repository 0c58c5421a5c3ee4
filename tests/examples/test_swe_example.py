"""examples/swe: a shell-using agent fixes tiny repositories in real sandboxes; hidden tests score it.

Every rollout here runs in a real bubblewrap sandbox through the real engine
and a real loopback model server; the last test SIGKILLs a real ``benchmax
eval`` process mid-rollout and checks that no sandbox process or mount outlives it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmax.envs import DatasetError, RolloutRequest, SamplingParams
from benchmax.testing import ScriptedServer

SRC = Path(__file__).resolve().parents[2] / "src"


def sandbox_processes(*, ids: set[str] | None = None, under: int | None = None) -> dict[int, str]:
    """Host processes (not zombies) that belong to a sandbox, with their command lines.

    Only this test's: sandboxes whose id is in ``ids``, or processes descended from ``under``
    (default: this process). Other jobs on the machine (another test run, a stray manual run)
    have sandboxes of their own that say nothing about this test's.
    """
    under = os.getpid() if under is None and ids is None else under
    parents: dict[int, int] = {}
    candidates: dict[int, tuple[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rpartition(")")[2].split()
            parents[int(entry.name)] = int(stat[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:300].decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        sandbox = next(
            (item[20:].decode(errors="replace") for item in environ if item.startswith(b"BENCHMAX_SANDBOX_ID=")), None
        )
        if sandbox is not None and stat[0] != "Z":
            candidates[int(entry.name)] = (sandbox, command)

    def descends(pid: int) -> bool:
        seen = 0
        while pid > 1 and seen < 4096:
            if pid == under:
                return True
            pid, seen = parents.get(pid, 0), seen + 1
        return False

    return {
        pid: command
        for pid, (sandbox, command) in candidates.items()
        if (ids is not None and sandbox in ids) or (under is not None and descends(pid))
    }


def sandbox_ids_under(pid: int) -> set[str]:
    """The ids of the sandboxes whose processes descend from ``pid`` now."""
    found: set[str] = set()
    for entry in sandbox_processes(under=pid):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        found.update(item[20:].decode(errors="replace") for item in environ if item.startswith(b"BENCHMAX_SANDBOX_ID="))
    return found


async def eventually(check, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


def turns(*steps: dict[str, Any]):
    """A policy playing ``steps`` in order, one per model turn, then the last one forever."""
    return lambda body: steps[min(sum(m["role"] == "assistant" for m in body["messages"]), len(steps) - 1)]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


DONE = {"content": "done"}


async def run_all(env, examples, server, make_engine):
    engine = make_engine(env)
    requests = [RolloutRequest(f"swe-{i}", example, "scripted", server.base_url) for i, example in enumerate(examples)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


def tool_results(outcome) -> list[str]:
    return [message["content"] for message in outcome.messages if message["role"] == "tool"]


@pytest.fixture
async def env(load_example):
    env = load_example("swe")()
    yield env
    await env.aclose()


async def task(env, example_dir, name: str):
    dataset = await env.create_dataset("train", example_dir("swe"))
    (example,) = [example for example in dataset if example.payload["name"] == name]
    return example


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("swe").__name__ == "SweEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_the_scripted_engineer_fixes_every_repository_without_touching_its_tests(
    env, load_policy, example_dir, make_engine, split
):
    dataset = await env.create_dataset(split, example_dir("swe"))
    with ScriptedServer(load_policy("swe")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 4
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"hidden_tests": 1.0, "tests_untouched": 1.0}, tool_results(outcome)
        before, _, wrote, after = tool_results(outcome)
        assert "FAILED" in orjson.loads(before)["stdout"] and "OK" in orjson.loads(after)["stdout"]
        assert wrote.startswith("wrote ")
    assert len(env._sandboxes) == 0
    assert await eventually(lambda: not sandbox_processes())


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_every_tasks_hidden_tests_catch_its_bug(env, example_dir, make_engine, split):
    """The data itself: leaving the bug in fails at least one hidden test of every task."""
    dataset = await env.create_dataset(split, example_dir("swe"))
    with ScriptedServer(lambda body: DONE) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    unfixed = {example.payload["name"]: o.rewards["hidden_tests"] for example, o in zip(dataset, outcomes, strict=True)}
    assert all(score < 1.0 for score in unfixed.values()), unfixed


async def test_a_model_that_rewrites_the_tests_instead_of_the_code_scores_zero(env, example_dir, make_engine):
    example = await task(env, example_dir, "calc_add")
    cheat = "import unittest\n\n\nclass TestAdd(unittest.TestCase):\n    def test_small(self):\n        pass\n"
    policy = turns(
        call("write_file", path="tests/test_calc.py", content=cheat),
        call("shell", command="python -m unittest discover -s tests"),
        DONE,
    )
    with ScriptedServer(policy) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    assert "OK" in orjson.loads(tool_results(outcome)[1])["stderr"]  # the rewritten tests do pass
    assert outcome.rewards["tests_untouched"] == 0.0
    assert outcome.rewards["hidden_tests"] < 1.0  # graded against the original and hidden tests


async def test_doing_nothing_scores_only_the_hidden_tests_the_bug_leaves_passing(env, example_dir, make_engine):
    example = await task(env, example_dir, "calc_add")  # 1 of its 3 hidden tests does not touch the bug
    with ScriptedServer(lambda body: DONE) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    assert outcome.rewards == {"hidden_tests": pytest.approx(1 / 3), "tests_untouched": 1.0}


async def test_a_daemon_left_to_rewrite_the_hidden_tests_is_killed_before_grading(env, example_dir, make_engine):
    example = await task(env, example_dir, "calc_add")
    fake = "import unittest\\n\\n\\nclass TestHidden(unittest.TestCase):\\n    def test_a(self):\\n        pass\\n"
    daemon = (
        "setsid sh -c 'while :; do for f in tests/test_hidden_*.py; do "
        f'[ -e "$f" ] && printf "{fake}" > "$f"; done; sleep 0.01; done\' >/dev/null 2>&1 </dev/null & echo started'
    )
    with ScriptedServer(turns(call("shell", command=daemon), DONE)) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    assert orjson.loads(tool_results(outcome)[0])["stdout"] == "started\n"
    assert outcome.rewards == {"hidden_tests": pytest.approx(1 / 3), "tests_untouched": 1.0}


async def test_fake_result_lines_and_a_shadowing_unittest_module_do_not_fool_the_grader(env, example_dir, make_engine):
    example = await task(env, example_dir, "calc_add")
    fake_line = orjson.dumps({"nonce": "guess", "run": 3, "failed": 0}).decode()
    liar = f"print({fake_line!r})\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    shadow = f"print({fake_line!r})\nraise SystemExit(0)\n"
    policy = turns(
        call("write_file", path="calc.py", content=liar), call("write_file", path="unittest.py", content=shadow), DONE
    )
    with ScriptedServer(policy) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    assert outcome.rewards == {"hidden_tests": pytest.approx(1 / 3), "tests_untouched": 1.0}


async def test_tool_failures_reach_the_model_as_errors_and_the_rollout_goes_on(load_example, example_dir, make_engine):
    env = load_example("swe")(command_timeout=1.0)
    try:
        example = await task(env, example_dir, "calc_add")
        policy = turns(
            call("shell", command="sleep 30"),
            call("read_file", path="nope.py"),
            call("read_file", path="tests"),
            call("write_file", path="/usr/lib/evil.py", content="x"),
            call("shell", command="cat /root/.bashrc ~/.ssh/id_rsa 2>&1; echo $OPENAI_API_KEY; exit 4"),
            DONE,
        )
        with ScriptedServer(policy) as server:
            (outcome,) = await run_all(env, [example], server, make_engine)
    finally:
        await env.aclose()
    assert outcome.termination_reason == "finished", outcome.error
    timeout, missing, directory, readonly, probe = tool_results(outcome)
    assert timeout == "error: the command ran past the 1 s limit and was stopped"
    assert missing == "error: no such file: nope.py"
    assert directory.startswith("error: tests is a directory")
    assert readonly.startswith("error: cannot write /usr/lib/evil.py")
    shown = orjson.loads(probe)
    assert shown["exit_code"] == 4 and "No such file or directory" in shown["stdout"]


async def test_a_task_with_hidden_tests_outside_tests_fails_at_load_with_file_and_line(load_example, tmp_path):
    row = {
        "name": "x",
        "prompt_messages": [{"role": "user", "content": "x"}],
        "repo": {"m.py": "", "tests/test_m.py": ""},
        "hidden_tests": {"m_hidden.py": ""},
    }
    (tmp_path / "eval.jsonl").write_bytes(b"\n" + orjson.dumps(row) + b"\n")
    env = load_example("swe")()
    with pytest.raises(DatasetError, match=r"eval\.jsonl:2: hidden_tests\['m_hidden.py'\] must be tests/test_hidden_"):
        await env.create_dataset("eval", tmp_path)
    await env.aclose()


async def test_sigkill_of_a_benchmax_eval_run_mid_rollout_leaves_no_sandbox_behind(example_dir, tmp_path):
    assert not sandbox_processes(), "sandboxes of earlier tests are still alive"
    mounts_before = Path("/proc/self/mountinfo").read_text().count("\n")
    policy = turns(call("shell", command="sleep 300"), DONE)
    with ScriptedServer(policy) as server:
        command = [
            sys.executable, "-m", "benchmax.cli", "eval", str(example_dir("swe")),
            "--base-url", server.base_url, "--model", "scripted", "--max-examples", "3",
            "--env-arg", "command_timeout=600", "--run-dir", str(tmp_path / "run"),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp_path)}
        run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        mine: set[str] = set()
        try:

            def sleeping() -> bool:
                return sum(cmd.startswith("sleep 300") for cmd in sandbox_processes(under=run.pid).values()) == 3

            assert await eventually(sleeping, within=120), (run.poll(), sandbox_processes(under=run.pid))
            mine = sandbox_ids_under(run.pid)
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait()
    assert len(mine) == 3
    assert await eventually(lambda: not sandbox_processes(ids=mine)), sandbox_processes(ids=mine)
    assert Path("/proc/self/mountinfo").read_text().count("\n") == mounts_before
    assert [path.name for path in tmp_path.iterdir()] == ["run"]  # nothing of the sandboxes on disk


async def test_the_embedded_model_runs_a_task_end_to_end_in_the_sandbox(
    load_example, example_dir, make_engine, tmp_path
):
    """SmolLM2 through llama.cpp (the ``local`` extra, which CI installs: missing, this fails like tests/local).

    Four turns keep it short on one CPU thread; the 135M model is not expected to fix the bug.
    """
    from benchmax.local import EmbeddedModel, EmbeddedModelError, check_installed

    try:
        check_installed()
    except EmbeddedModelError as error:
        pytest.fail(f"the 'local' extra is required for this test: {error}", pytrace=False)
    env = load_example("swe")(max_turns=4)
    example = await task(env, example_dir, "calc_add")
    with EmbeddedModel(tmp_path / "embedded", default_max_tokens=64) as model:
        request = RolloutRequest(
            "embedded-0", example, model.model, model.base_url, sampling=SamplingParams(max_tokens=64, temperature=0.0)
        )
        (outcome,) = (await make_engine(env).run_group([request])).outcomes
    budget_stops = {"finished", "max_turns_exceeded", "tool_budget_exceeded", "output_exceeded", "context_exceeded"}
    assert outcome.termination_reason in budget_stops, outcome.error  # the model's doing: scored
    assert set(outcome.rewards) == {"hidden_tests", "tests_untouched"}
    assert 0.0 <= outcome.rewards["hidden_tests"] <= 1.0
    assert outcome.turns and outcome.usage.completion_tokens > 0
    assert len(env._sandboxes) == 0 and await eventually(lambda: not sandbox_processes())
    await env.aclose()
