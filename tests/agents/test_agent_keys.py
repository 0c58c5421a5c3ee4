"""The run's API key stays out of an unsandboxed command agent's reach, and out of what it returns."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import ScoredAgents, example

from benchmax.client import RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import RolloutRequest, StaticBearerAuth, TerminationReason
from benchmax.testing import ScriptedServer

KEY = "sk-run-key-0123456789abcdefghijklmnopqrstuv"
DRIVER = Path(__file__).with_name("key_driver.py")


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and prctl are Linux's")
@pytest.mark.parametrize("mode", ["environ", "mem"])
def test_an_unsandboxed_command_cannot_read_the_key_out_of_the_driver(scripted_server: ScriptedServer, mode: str):
    """The driver starts with the key in its environment (``OPENAI_API_KEY=... benchmax eval``); the agent,
    its child and the same user (root included), reads ``/proc/<driver>/environ`` or ``mem`` and prints
    what it found ROT13-encoded, which no masking recognises: the key must not be there at all."""
    done = subprocess.run(
        [sys.executable, str(DRIVER), scripted_server.base_url, mode],
        env={**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=DRIVER.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    answer = codecs.decode(outcome["messages"][-1]["content"], "rot13")
    assert "unreadable" in answer, answer[:500]
    assert KEY not in answer and KEY not in done.stdout


async def test_whatever_the_agent_returns_has_the_runs_key_masked(scripted_server: ScriptedServer):
    """However it came by the key, the answer, the error, the stderr tail and every logged line mask it."""
    leak = (
        "import os, sys\n"
        "key = os.environ['PLANTED']\n"
        "print('my answer is ' + key)\n"
        "print('debug: using ' + key, file=sys.stderr)\n"
        "sys.exit(3)\n"
    )

    class Leaky(ScoredAgents):
        command_env = {"PLANTED": KEY}

    env = Leaky(command=[sys.executable, "-c", leak])
    engine = Engine(env, EngineConfig(retry=RetryPolicy(max_attempts=1)))
    request = RolloutRequest(
        "leak-0", example(), model="scripted", base_url=scripted_server.base_url, model_auth=StaticBearerAuth(KEY)
    )
    try:
        (outcome,) = (await engine.run_group([request])).outcomes
    finally:
        await env.aclose()
        await engine.aclose()
    assert outcome.termination_reason == "agent_error"
    stored = json.dumps([outcome.messages, outcome.error, [entry.message for entry in outcome.logs]])
    assert KEY not in stored and KEY[:16] not in stored
    assert "my answer is ***" in outcome.messages[-1]["content"]
    assert "debug: using ***" in (outcome.error or "")
    assert "debug: using ***" in [entry.message for entry in outcome.logs]


async def test_an_agents_transcript_honours_max_content_chars(scripted_server: ScriptedServer):
    """An agent may send a huge message and print a huge answer; the stored transcript is bounded
    like the engine's own turns (``--max-content-chars``)."""
    huge = (
        "import json, os, sys, urllib.request\n"
        "example = json.load(sys.stdin)\n"
        "messages = example['prompt_messages'] + [{'role': 'user', 'content': 'x' * 50000}]\n"
        "request = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions',\n"
        "    data=json.dumps({'model': 'any', 'messages': messages}).encode(),\n"
        "    headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']})\n"
        "urllib.request.urlopen(request, timeout=60).read()\n"
        "print('y' * 30000)\n"
    )
    env = ScoredAgents(command=[sys.executable, "-c", huge])
    engine = Engine(env, EngineConfig(retry=RetryPolicy(max_attempts=1), max_content_chars=1_000))
    request = RolloutRequest("huge-0", example([{"content": "5"}]), model="scripted", base_url=scripted_server.base_url)
    try:
        (outcome,) = (await engine.run_group([request])).outcomes
    finally:
        await env.aclose()
        await engine.aclose()
    assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
    sizes = [len(message["content"]) for message in outcome.messages if isinstance(message.get("content"), str)]
    assert max(sizes) < 1_100, sizes
    assert any("truncated 49000 chars" in message["content"] for message in outcome.messages)
    assert (
        outcome.messages[-1]["content"].startswith("y" * 1_000)
        and "truncated 29000 chars" in outcome.messages[-1]["content"]
    )
