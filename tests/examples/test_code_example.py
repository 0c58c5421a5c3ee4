"""examples/code: a sandboxed run_python tool, hidden tests as the reward, sandboxes that vanish."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson
import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import DatasetError, RolloutRequest
from benchmax.testing import ScriptedServer


def sandbox_ids(outcome) -> list[str]:
    found = [re.fullmatch(r"sandbox for .+ is (\w+)", entry.message) for entry in outcome.logs]
    return [match.group(1) for match in found if match]


def running(sandbox_id: str) -> bool:
    """Whether any host process still belongs to that sandbox (its id is in their environment)."""
    needle = f"BENCHMAX_SANDBOX_ID={sandbox_id}".encode()
    for entry in Path("/proc").iterdir():
        try:
            mine = entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0")
            if mine and (entry / "stat").read_text().rpartition(")")[2].split()[0] != "Z":
                return True
        except OSError:
            continue
    return False


async def gone(sandbox_id: str) -> bool:
    for _ in range(200):
        if not running(sandbox_id):
            return True
        await asyncio.sleep(0.05)
    return False


def turns(steps: list[dict]):
    """A policy playing ``steps`` in order, one per model turn."""
    return lambda body: steps[min(sum(m["role"] == "assistant" for m in body["messages"]), len(steps) - 1)]


def run(code: str, stdin: str = "") -> dict:
    return {"tool_calls": [{"name": "run_python", "arguments": {"code": code, "stdin": stdin}}]}


async def run_all(env, dataset, server, make_engine, config=None):
    engine = make_engine(env, config)
    requests = [RolloutRequest(f"code-{i}", example, "scripted", server.base_url) for i, example in enumerate(dataset)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


def tool_results(outcome) -> list[str]:
    return [m["content"] for m in outcome.messages if m["role"] == "tool"]


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("code").__name__ == "CodeEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_tries_then_answers_with_a_correct_program_passes_every_hidden_test(
    load_example, load_policy, example_dir, make_engine, split
):
    env = load_example("code")()
    dataset = await env.create_dataset(split, example_dir("code"))
    with ScriptedServer(load_policy("code")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 6
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"tests_passed": 1.0}, outcome.messages
        (result,) = tool_results(outcome)
        assert orjson.loads(result)["exit_code"] == 0
        (sandbox,) = sandbox_ids(outcome)
        assert await gone(sandbox)
    assert len(env._sandboxes) == 0 and env._locks == {}


async def test_wrong_or_missing_programs_score_zero(load_example, example_dir, make_engine):
    env = load_example("code")()
    dataset = await env.create_dataset("eval", example_dir("code"), max_examples=3)
    with ScriptedServer(lambda body: {"content": "```python\nprint(0)\n```"}) as server:
        wrong = await run_all(env, dataset, server, make_engine)
    with ScriptedServer(lambda body: {"content": "I would rather not."}) as server:
        missing = await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in wrong + missing] == [{"tests_passed": 0.0}] * 6


async def test_the_reward_is_the_fraction_of_hidden_tests_passed(load_example, example_dir, make_engine):
    env = load_example("code")()
    dataset = [e for e in await env.create_dataset("train", example_dir("code")) if e.payload["name"] == "is_prime"]
    with ScriptedServer(lambda body: {"content": "```python\nprint('no')\n```"}) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    expected = sum(test["expected_stdout"] == "no\n" for test in dataset[0].payload["tests"])
    assert 0 < expected < len(dataset[0].payload["tests"])
    assert outcome.rewards == {"tests_passed": expected / len(dataset[0].payload["tests"])}


async def test_sandbox_limits_come_back_as_tool_errors_and_the_rollout_goes_on(load_example, example_dir, make_engine):
    env = load_example("code")(timeout=1.0, memory_mb=128)
    dataset = await env.create_dataset("train", example_dir("code"), max_examples=1)
    steps = [
        run("while True:\n    pass"),
        run("data = bytearray(1024 * 1024 * 1024)"),
        run("import sys\nsys.stdout.write('x' * 4_000_000)"),
        run("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)"),
        run("open('/etc/benchmax-code-escape.txt', 'w')"),
        run("raise SystemExit(3)"),
        {"content": "```python\nprint(sum(map(int, input().split())))\n```"},
    ]
    with ScriptedServer(turns(steps)) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    assert outcome.termination_reason == "finished", outcome.error
    results = tool_results(outcome)
    assert results[0] == "error: the program ran past the 1 s time limit and was stopped"
    assert results[1] == "error: the program ran out of memory (limit 128 MB)"
    assert results[2] == "error: the program wrote more output than the 1 MiB limit and was stopped"
    network = orjson.loads(results[3])
    assert network["exit_code"] != 0 and "Error" in network["stderr"]
    escape = orjson.loads(results[4])
    assert escape["exit_code"] != 0 and "Read-only file system" in escape["stderr"]
    assert not Path("/etc/benchmax-code-escape.txt").exists()
    assert orjson.loads(results[5]) == {"exit_code": 3, "stdout": "", "stderr": ""}
    assert outcome.rewards == {"tests_passed": 1.0}
    (sandbox,) = sandbox_ids(outcome)
    assert await gone(sandbox)


async def test_files_persist_between_runs_of_one_rollout_and_no_further(load_example, example_dir):
    env = load_example("code")()
    (example,) = await env.create_dataset("train", example_dir("code"), max_examples=1)
    async with env.rollout_context("a", example), env.rollout_context("b", example):
        await env.run_tool("a", "run_python", code="open('helper.py', 'w').write('ANSWER = 42')")
        assert (await env.run_tool("a", "run_python", code="import helper\nprint(helper.ANSWER)"))["stdout"] == "42\n"
        other = await env.run_tool("b", "run_python", code="import helper")
        assert other["exit_code"] == 1 and "ModuleNotFoundError" in other["stderr"]
        ids = [env._sandboxes["a"].id, env._sandboxes["b"].id]
        assert (await env._sandboxes["a"].read_file("helper.py")) == b"ANSWER = 42"
    assert ids[0] != ids[1]
    assert all([await gone(sandbox) for sandbox in ids])


async def test_the_sandbox_is_stopped_when_the_model_fails_or_the_rollout_is_cancelled(
    load_example, example_dir, make_engine
):
    env = load_example("code")()
    dataset = await env.create_dataset("eval", example_dir("code"), max_examples=1)
    with ScriptedServer(lambda body: {"status": 500}) as server:
        (failed,) = await run_all(env, dataset, server, make_engine, EngineConfig(retry=RetryPolicy(max_attempts=1)))
    assert failed.termination_reason == "model_error"
    assert all([await gone(sandbox) for sandbox in sandbox_ids(failed)])
    with ScriptedServer(lambda body: {"sleep": 30, "content": "late"}) as server:
        task = asyncio.create_task(
            make_engine(env).run_group([RolloutRequest("c", dataset[0], "scripted", server.base_url)])
        )
        while not server.requests:
            await asyncio.sleep(0.01)
        sandbox = env._sandboxes["c"].id
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await gone(sandbox)
    assert len(env._sandboxes) == 0


async def test_a_task_with_a_malformed_test_fails_at_load_with_file_and_line(load_example, tmp_path):
    row = {"prompt_messages": [{"role": "user", "content": "x"}], "name": "x", "tests": [{"stdin": "1"}]}
    (tmp_path / "eval.jsonl").write_bytes(b"\n" + orjson.dumps(row) + b"\n")
    with pytest.raises(DatasetError, match=r"eval\.jsonl:2: tests\[0\]: CodeTest needs expected_stdout or check"):
        await load_example("code")().create_dataset("eval", tmp_path)
