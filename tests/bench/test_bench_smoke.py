"""The benchmark keeps working: its fake server speaks correct HTTP, and the smoke run passes.

Not a timed test: figures are printed by ``bench/run.py``, never asserted here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import httpx
import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


@pytest.fixture
def fake_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    process = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split()[-1], process
    if process.poll() is None:
        process.terminate()
        process.wait(10)


def _question() -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 40?"}]}


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 7):
        yield body[start : start + 7]


async def test_fake_server_plays_the_tool_policy_over_one_keep_alive_connection_with_httpx(
    fake_server: tuple[str, subprocess.Popen[str]],
) -> None:
    base_url, _ = fake_server
    async with httpx.AsyncClient(base_url=base_url) as client:
        first = (await client.post("/chat/completions", json=_question())).json()
        call = first["choices"][0]["message"]["tool_calls"][0]
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 40}
        follow_up = _question()
        follow_up["messages"] += [  # type: ignore[operator]
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "42"},
        ]
        chunked = await client.post("/chat/completions", content=_chunks(orjson.dumps(follow_up)))
        assert chunked.json()["choices"][0]["message"]["content"] == "42"
        stats = (await client.get(base_url.removesuffix("/v1") + "/stats")).json()
    assert stats["tool_calls"] == 1 and stats["final_answers"] == 1
    assert stats["connections_total"] == 1


async def test_fake_server_answers_concurrent_aiohttp_requests_and_rejects_bad_json(
    fake_server: tuple[str, subprocess.Popen[str]],
) -> None:
    base_url, _ = fake_server
    async with aiohttp.ClientSession() as session:

        async def ask() -> str:
            async with session.post(f"{base_url}/chat/completions", json=_question()) as reply:
                return (await reply.json())["choices"][0]["finish_reason"]

        reasons = await asyncio.gather(*(ask() for _ in range(200)))
        async with session.post(f"{base_url}/chat/completions", data=b"{not json") as reply:
            status = reply.status
    assert reasons == ["tool_calls"] * 200
    assert status == 400


def test_fake_server_prints_its_counters_when_stopped(
    fake_server: tuple[str, subprocess.Popen[str]],
) -> None:
    base_url, process = fake_server
    httpx.post(f"{base_url}/chat/completions", json=_question())
    process.terminate()
    out, _ = process.communicate(timeout=10)
    stats = json.loads(out.strip().splitlines()[-1])["stats"]
    assert stats["completions"] == 1


def test_smoke_benchmark_runs_the_runner_end_to_end_with_no_failures(tmp_path: Path) -> None:
    raw = tmp_path / "runs.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--json", str(raw)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| 0 ms | 16 | ours |" in done.stdout
    (run,) = json.loads(raw.read_text())
    assert run["impl"] == "ours" and run["path"] == "runner"
    assert run["failures"] == 0
    assert run["rollouts"] == 64
    assert run["store_bytes"] > 0
