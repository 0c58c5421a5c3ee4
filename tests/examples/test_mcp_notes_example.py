"""examples/mcp_notes: a real MCP notes server per rollout, confined to the rollout's temp dir."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmax.envs import DatasetError, RolloutFailure, RolloutRequest, ToolError
from benchmax.loading import EnvSpec
from benchmax.runner import validate_env
from benchmax.testing import ScriptedServer
from benchmax.tools.mcp import MCP_ERROR, HttpServer, McpTools


def call(tool: str, **arguments: str) -> dict:
    return {"name": tool, "arguments": arguments}


def turn(*calls: dict) -> dict:
    return {"tool_calls": list(calls)}


def note_dirs(outcome) -> list[Path]:
    found = [re.fullmatch(r"notes for .+ at (.+)", entry.message) for entry in outcome.logs]
    return [Path(match.group(1)) for match in found if match]


def notes_servers() -> list[int]:
    """Live children of this test process that run the example's server.py."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"mcp_notes/server.py" in cmdline:
            found.append(int(entry.name))
    return found


async def no_servers_left(within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while notes_servers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not notes_servers()


async def run_all(env, examples, server, make_engine):
    engine = make_engine(env)
    requests = [
        RolloutRequest(f"notes-{index}", example, "scripted", server.base_url) for index, example in enumerate(examples)
    ]
    return await asyncio.gather(*(engine.run_rollout(request) for request in requests))


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("mcp_notes").__name__ == "McpNotesEnv"


async def test_the_example_validates_cleanly_with_its_mcp_tools(example_dir):
    report = await validate_env(EnvSpec(str(example_dir("mcp_notes"))))
    assert report.ok, report.problems
    assert "6 tools: list_notes, read_note, write_note, append_to_note, delete_note, search_notes" in report.notes
    assert await no_servers_left()


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_does_the_task_scores_and_every_server_and_dir_is_gone(
    load_example, load_policy, example_dir, make_engine, split
):
    env = load_example("mcp_notes")()
    dataset = list(await env.create_dataset(split, example_dir("mcp_notes")))
    with ScriptedServer(load_policy("mcp_notes")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 4
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"correct": 1.0, "untouched": 1.0}, outcome.messages
        (path,) = note_dirs(outcome)
        assert path.name.startswith("benchmax-notes-")
        assert not path.exists()
    assert await no_servers_left()
    await env.aclose()


async def test_a_model_that_does_nothing_scores_zero(load_example, example_dir, make_engine):
    env = load_example("mcp_notes")()
    dataset = list(await env.create_dataset("train", example_dir("mcp_notes"), max_examples=2))
    with ScriptedServer(lambda body: {"content": "I will not."}) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert [outcome.rewards["correct"] for outcome in outcomes] == [0.0, 0.0]
    assert [outcome.rewards["untouched"] for outcome in outcomes] == [1.0, 1.0]


async def test_the_server_refuses_paths_outside_the_rollouts_dir(load_example, example_dir, make_engine, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    steps = [
        turn(
            call("write_note", name="../escape.md", content="x"),
            call("read_note", name=str(outside)),
            call("write_note", name=str(tmp_path / "new.md"), content="x"),
            call("delete_note", name="../../etc/hostname"),
            call("read_note", name="missing.md"),
            call("write_note", name="sub/dir/ok.md", content="fine"),
        ),
        turn(call("read_note", name="sub/dir/ok.md")),
        {"content": "done"},
    ]
    env = load_example("mcp_notes")()
    (example,) = await env.create_dataset("eval", example_dir("mcp_notes"), max_examples=1)
    with ScriptedServer(lambda body: steps[sum(m["role"] == "assistant" for m in body["messages"])]) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    results = [m["content"] for m in outcome.messages if m["role"] == "tool"]
    prefix = "error: Error executing tool"
    assert results[0] == f"{prefix} write_note: '../escape.md' is outside the notes directory"
    assert results[1] == f"{prefix} read_note: {str(outside)!r} is outside the notes directory"
    assert results[2] == f"{prefix} write_note: {str(tmp_path / 'new.md')!r} is outside the notes directory"
    assert results[3] == f"{prefix} delete_note: '../../etc/hostname' is outside the notes directory"
    assert results[4] == f"{prefix} read_note: no note named 'missing.md'; call list_notes to see the names"
    assert results[5] == "saved sub/dir/ok.md (4 bytes)"
    assert results[6] == "fine"
    assert outcome.termination_reason == "finished"
    assert outside.read_text() == "secret\n"
    assert not (tmp_path / "new.md").exists()
    (path,) = note_dirs(outcome)
    assert not (path.parent / "escape.md").exists()


async def test_killing_the_notes_server_mid_rollout_is_an_mcp_error_and_cleans_up(
    load_example, example_dir, make_engine
):
    def policy(body: dict) -> dict:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return turn(call("list_notes"))
        for pid in notes_servers():
            os.kill(pid, signal.SIGKILL)
        return turn(call("write_note", name="reading.md", content="Dune\n"))

    env = load_example("mcp_notes")()
    (example,) = await env.create_dataset("eval", example_dir("mcp_notes"), max_examples=1)
    with ScriptedServer(policy) as server:
        (outcome,) = await run_all(env, [example], server, make_engine)
    assert outcome.termination_reason == MCP_ERROR
    assert "closed the connection during tools/call 'write_note' (the server exited or crashed)" in outcome.error
    assert outcome.rewards == {}
    (path,) = note_dirs(outcome)
    assert not path.exists()
    assert await no_servers_left()


async def test_the_notes_server_works_over_streamable_http_confined_to_its_root(example_dir, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = tmp_path / "notes"
    root.mkdir()
    (root / "seed.md").write_text("from disk\n")
    (tmp_path / "secret.md").write_text("not yours\n")
    (root / "link.md").symlink_to(tmp_path / "secret.md")
    command = [sys.executable, str(example_dir("mcp_notes") / "server.py"), "--root", str(root)]
    process = subprocess.Popen(
        [*command, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    tools = McpTools(HttpServer(f"http://127.0.0.1:{port}/mcp"), per_rollout=False)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the HTTP notes server did not start"
                await asyncio.sleep(0.05)
        assert len(await tools.list_tools()) == 6
        async with tools.session("a"), tools.session("b"):
            assert await tools.call("a", "write_note", {"name": "new.md", "content": "over http"}) == (
                "saved new.md (9 bytes)"
            )
            assert await tools.call("b", "list_notes", {}) == "link.md\nnew.md\nseed.md"
            with pytest.raises(ToolError, match=r"'link\.md' is outside the notes directory"):
                await tools.call("b", "read_note", {"name": "link.md"})
            assert await tools.call("b", "read_note", {"name": "seed.md"}) == "from disk\n"
            with pytest.raises(ToolError, match="outside the notes directory"):
                await tools.call("a", "write_note", {"name": "../escape.md", "content": "x"})
        assert (root / "new.md").read_text() == "over http"
        assert not (tmp_path / "escape.md").exists()
        process.kill()
        process.wait()
        with pytest.raises(RolloutFailure) as failure:
            await tools.call("c", "list_notes", {})
        assert failure.value.reason == MCP_ERROR
    finally:
        await tools.aclose()
        process.kill()
        process.wait()


async def test_a_row_with_a_note_outside_the_dir_fails_at_load_with_file_and_line(load_example, tmp_path):
    env = load_example("mcp_notes")()
    (tmp_path / "eval.jsonl").write_text(
        '{"prompt_messages": [{"role": "user", "content": "x"}], "check": [{"absent": "../x.md"}]}\n'
    )
    with pytest.raises(DatasetError, match=r"eval\.jsonl:1: note name '\.\./x\.md' must be a relative path"):
        await env.create_dataset("eval", tmp_path)

