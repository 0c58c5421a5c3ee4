"""A served env that chooses tools per rollout: each session carries its example's tools, and only those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import tools_for_env
from serve_support import wait_until, write_rows

from benchmax import open_run
from benchmax.runner import RunConfig, arun
from benchmax.testing import free_port

LEAK = [{"tool_calls": [{"name": "calculator", "arguments": {"a": 1, "b": 1}}]}, {"content": "hello"}]
CALC = [{"tool_calls": [{"name": "calculator", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}]


def _row(kind: str, steps: list[dict], answer: str) -> dict:
    content = f"{kind} row\n#script: {json.dumps(steps)}"
    return {"prompt_messages": [{"role": "user", "content": content}], "kind": kind, "answer": answer}


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def test_a_served_env_sends_each_row_its_own_tools_and_refuses_the_others(tmp_path: Path, model):
    data = write_rows(tmp_path / "data", [_row("text", LEAK, "hello"), _row("calculator", CALC, "5")])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "benchmax.cli", "serve", f"{tools_for_env.__file__}:RowToolsEnv",
        "--port", str(port), "--data-dir", str(data), "--no-token",
    ]  # fmt: skip
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        wait_until("the env server answering", lambda: _answers(url), proc=process)
        await arun(RunConfig(env=url, base_url=model.base_url, model="scripted", run_dir=tmp_path / "run"))

        text_requests = [b for b in model.requests if b["messages"][0]["content"].startswith("text row")]
        calc_requests = [b for b in model.requests if b["messages"][0]["content"].startswith("calculator row")]
        assert len(text_requests) == len(calc_requests) == 2
        assert all("tools" not in body for body in text_requests)
        assert all([t["function"]["name"] for t in body["tools"]] == ["calculator"] for body in calc_requests)
        with open_run(tmp_path / "run") as run:
            records = {record.messages[0]["content"].split("\n")[0]: record for record in run.rollouts()}
        assert records["calculator row"].rewards == {"correct": 1.0}
        assert [m["content"] for m in records["text row"].messages if m["role"] == "tool"] == [
            "Unknown tool: calculator"
        ]

        # A client that calls the server directly gets the same answer for a tool outside the session's set.
        opened = httpx.post(f"{url}/sessions", json={"split": "eval", "index": 0}, timeout=30).json()
        assert opened["tools"] == []
        called = httpx.post(
            f"{url}/sessions/{opened['session_id']}/tools/calculator", json={"arguments": {"a": 1, "b": 1}}, timeout=30
        ).json()
        assert called["error"]["code"] == "tool_error"
        assert called["error"]["message"] == "Unknown tool: calculator"
        httpx.delete(f"{url}/sessions/{opened['session_id']}", timeout=30)
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()
