"""examples/workspace: per-rollout temp dirs that tools use, the reward checks, and that vanish."""

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


def call(name: str, **arguments: str) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# What a competent model does for each task, turn by turn (keyed by a phrase of the task).
SOLUTIONS: dict[str, list[dict]] = {
    "total quantity": [
        call("read_file", path="stock.csv"),
        call("write_file", path="total.txt", content="42\n"),
    ],
    "sorted alphabetically": [
        call("read_file", path="todo.txt"),
        call(
            "write_file",
            path="sorted.txt",
            content="buy milk\ncall the bank\nfix the bike\nwater the plants\n",
        ),
    ],
    "set workers to 8": [
        call("read_file", path="settings.json"),
        call("write_file", path="settings.json", content='{"debug": true, "workers": 8, "name": "demo"}'),
    ],
    "first line of notes.md": [
        call("read_file", path="notes.md"),
        call("write_file", path="title.txt", content="Meeting notes"),
    ],
    "How many items": [call("write_file", path="count.txt", content="3")],
    "number of lines in todo.txt": [call("write_file", path="count.txt", content="4")],
    "set debug to false": [
        call("write_file", path="settings.json", content='{"debug": false, "workers": 2, "name": "demo"}'),
    ],
    "How many .md files": [call("list_files"), call("write_file", path="count.txt", content="2")],
}


def solving_policy(body: dict) -> dict:
    messages = body["messages"]
    task = next(m["content"] for m in messages if m["role"] == "user")
    steps = next(steps for phrase, steps in SOLUTIONS.items() if phrase in task)
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return steps[turn] if turn < len(steps) else {"content": "Done."}


def workspace_paths(outcome) -> list[Path]:
    found = [re.fullmatch(r"workspace for .+ at (.+)", entry.message) for entry in outcome.logs]
    return [Path(match.group(1)) for match in found if match]


async def run_all(env, dataset, server, make_engine, config=None):
    engine = make_engine(env, config)
    requests = [RolloutRequest(f"ws-{i}", example, "scripted", server.base_url) for i, example in enumerate(dataset)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("workspace").__name__ == "WorkspaceEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_does_the_task_scores_and_every_workspace_is_removed(
    load_example, example_dir, make_engine, split
):
    env = load_example("workspace")()
    dataset = await env.create_dataset(split, example_dir("workspace"))
    with ScriptedServer(solving_policy) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 4
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"correct": 1.0}, outcome.messages
        (path,) = workspace_paths(outcome)
        assert path.name.startswith("benchmax-workspace-")
        assert not path.exists()
    assert len({path for outcome in outcomes for path in workspace_paths(outcome)}) == len(outcomes)
    assert env._workspaces == {}


async def test_a_model_that_does_nothing_scores_zero_and_the_fixtures_stay_untouched(
    load_example, example_dir, make_engine
):
    env = load_example("workspace")()
    before = {p: p.read_bytes() for p in (example_dir("workspace") / "fixtures").rglob("*") if p.is_file()}
    dataset = await env.create_dataset("train", example_dir("workspace"))
    with ScriptedServer(solving_policy) as server:
        await run_all(env, dataset, server, make_engine)
    with ScriptedServer(lambda body: {"content": "I will not."}) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in outcomes] == [{"correct": 0.0}] * len(dataset)
    after = {p: p.read_bytes() for p in (example_dir("workspace") / "fixtures").rglob("*") if p.is_file()}
    assert after == before


async def test_paths_outside_the_workspace_are_refused(load_example, example_dir, make_engine, tmp_path):
    outside = tmp_path / "outside.txt"
    steps = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "../escape.txt", "content": "x"}},
                {"name": "write_file", "arguments": {"path": str(outside), "content": "x"}},
                {"name": "read_file", "arguments": {"path": "/etc/hostname"}},
                {"name": "read_file", "arguments": {"path": "missing.txt"}},
                {"name": "write_file", "arguments": {"path": "sub/dir/ok.txt", "content": "fine"}},
                {"name": "read_file", "arguments": {"path": "sub/dir/ok.txt"}},
            ]
        },
        {"content": "done"},
    ]
    env = load_example("workspace")()
    dataset = await env.create_dataset("eval", example_dir("workspace"), max_examples=1)
    with ScriptedServer(lambda body: steps[sum(m["role"] == "assistant" for m in body["messages"])]) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    results = [m["content"] for m in outcome.messages if m["role"] == "tool"]
    assert results[0] == "error: '../escape.txt' is outside the workspace"
    assert results[1] == f"error: {str(outside)!r} is outside the workspace"
    assert results[2] == "error: '/etc/hostname' is outside the workspace"
    assert results[3] == "error: no such file: missing.txt"
    assert results[4] == "wrote 4 bytes to sub/dir/ok.txt"
    assert results[5] == "fine"
    assert not outside.exists()
    (path,) = workspace_paths(outcome)
    assert not (path.parent / "escape.txt").exists()
    assert not path.exists()


async def test_concurrent_rollouts_get_separate_workspaces(load_example, example_dir):
    env = load_example("workspace")()
    (example,) = await env.create_dataset("train", example_dir("workspace"), max_examples=1)
    async with env.rollout_context("a", example), env.rollout_context("b", example):
        await env.run_tool("a", "write_file", path="total.txt", content="from a")
        assert "total.txt" not in await env.run_tool("b", "list_files")
        assert await env.run_tool("a", "read_file", path="total.txt") == "from a"
        assert sorted(await env.run_tool("b", "list_files")) == ["stock.csv"]
        roots = {env._workspaces["a"], env._workspaces["b"]}
    assert len(roots) == 2
    assert not any(root.exists() for root in roots)


async def test_the_workspace_is_removed_when_the_model_fails(load_example, example_dir, make_engine):
    env = load_example("workspace")()
    dataset = await env.create_dataset("eval", example_dir("workspace"), max_examples=2)
    config = EngineConfig(retry=RetryPolicy(max_attempts=1))
    with ScriptedServer(lambda body: {"status": 500}) as server:
        outcomes = await run_all(env, dataset, server, make_engine, config)
    for outcome in outcomes:
        assert outcome.termination_reason == "model_error"
        (path,) = workspace_paths(outcome)
        assert not path.exists()


async def test_the_workspace_is_removed_when_the_rollout_is_cancelled(load_example, example_dir, make_engine):
    env = load_example("workspace")()
    (example,) = await env.create_dataset("eval", example_dir("workspace"), max_examples=1)
    with ScriptedServer(lambda body: {"sleep": 30, "content": "late"}) as server:
        engine = make_engine(env)
        task = asyncio.create_task(engine.run_group([RolloutRequest("c", example, "scripted", server.base_url)]))
        while not server.requests:
            await asyncio.sleep(0.01)
        root = env._workspaces["c"]
        assert (root / "stock.csv").is_file()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not root.exists()
    assert env._workspaces == {}


async def test_a_row_naming_a_missing_fixture_fails_at_load_with_file_and_line(load_example, tmp_path):
    env = load_example("workspace")()
    row = {"prompt_messages": [{"role": "user", "content": "x"}], "fixture": "nope", "check": {"path": "a"}}
    (tmp_path / "eval.jsonl").write_bytes(b"\n" + orjson.dumps(row) + b"\n")
    with pytest.raises(DatasetError, match=r"eval\.jsonl:2: no fixture directory .nope."):
        await env.create_dataset("eval", tmp_path)
