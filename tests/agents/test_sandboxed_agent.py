"""An agent command in the bwrap sandbox: the proxy (a forwarded port) is its one way out."""

from __future__ import annotations

import pytest
from agent_helpers import COMMAND, SCRIPT, TOOL_THEN_ANSWER, ScoredAgents, example

from benchmax.agents import AGENT_ERROR, ANSWER_NAME
from benchmax.envs import TerminationReason
from benchmax.sandbox import BwrapProvider, Mount, SandboxSpec, SandboxUnavailable


def _bwrap_works() -> bool:
    try:
        BwrapProvider().check()
    except SandboxUnavailable:
        return False
    return True


pytestmark = pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap cannot start sandboxes here")

SPEC = SandboxSpec(mounts=(Mount(SCRIPT.parent),))


async def test_a_sandboxed_command_reaches_the_model_only_through_the_proxy(run_group):
    env = ScoredAgents(command=COMMAND, sandbox=SPEC)
    (outcome,) = await run_group(env, example(TOOL_THEN_ANSWER))
    assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
    assert outcome.rewards["correct"] == 1.0
    assert len(outcome.turns) == 2


async def test_a_sandboxed_command_cannot_reach_the_host_network(run_group, scripted_server):
    """The scripted server listens on the host's loopback: from inside the sandbox it is unreachable."""
    probe = (
        "import json, sys, urllib.request\n"
        f"try:\n    urllib.request.urlopen({scripted_server.base_url + '/models'!r}, timeout=5)\n"
        "    print('reached')\nexcept Exception as exc:\n    print('blocked')\n"
    )
    import sys

    env = ScoredAgents(command=[sys.executable, "-c", probe], sandbox=SPEC)
    (outcome,) = await run_group(env, example())
    assert outcome.messages[-1]["content"] == "blocked"
    assert outcome.turns == ()


@pytest.mark.parametrize(
    ("mode", "reason", "calls", "scored"),
    [
        ("crash", AGENT_ERROR, 1, False),
        ("hang", TerminationReason.TIMEOUT, 1, False),
        ("flood", TerminationReason.MAX_TURNS_EXCEEDED, 3, True),
        ("binary", TerminationReason.FINISHED, 1, True),
    ],
)
async def test_a_misbehaving_sandboxed_command_ends_with_its_reason_and_keeps_its_calls(
    run_group, mode, reason, calls, scored
):
    """The same endings as a command run on the host (test_agent_env.py), from inside the sandbox."""
    env = ScoredAgents(command=COMMAND, sandbox=SPEC, max_calls=3, timeout=5.0)
    (outcome,) = await run_group(env, example([{"content": "5"}] * 5, mode=mode))
    assert outcome.termination_reason == reason, outcome.error
    assert len(outcome.turns) == calls
    assert outcome.scored is scored
    stderr = [entry.message for entry in outcome.logs if entry.logger == "benchmax.agents.stderr"]
    if mode == "crash":
        assert "boom, the agent fell over" in outcome.error
        assert "the agent command exited with status 3 in its sandbox" in outcome.error
    elif mode == "hang":
        assert "ran past its 5s limit" in outcome.error
    elif mode == "flood":
        assert any("max_calls_exceeded" in line for line in stderr)
    else:
        assert outcome.messages[-1] == {"role": "assistant", "content": "5 \ufffd\ufffd", "name": ANSWER_NAME}
        assert "bad bytes \ufffd\ufffd on stderr" in stderr


async def test_a_sandboxed_command_killed_by_a_signal_says_so(run_group):
    import sys

    command = [sys.executable, "-c", "import os, sys; print('dying', file=sys.stderr); os.kill(os.getpid(), 9)"]
    (outcome,) = await run_group(ScoredAgents(command=command, sandbox=SPEC), example())
    assert outcome.termination_reason == AGENT_ERROR
    assert "the agent command was killed by signal 9 in its sandbox: dying" in outcome.error


async def test_network_true_is_refused_for_an_agents_sandbox(run_group):
    env = ScoredAgents(command=COMMAND, sandbox=SandboxSpec(network=True))
    (outcome,) = await run_group(env, example(TOOL_THEN_ANSWER))
    assert outcome.termination_reason == TerminationReason.SANDBOX_ERROR
    assert "network=True" in (outcome.error or "")


_PROBE = r"""
import json, os, socket, sys, time, urllib.error, urllib.request

BASE, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
example = json.load(sys.stdin)
deadline = time.monotonic() + 120


def call(url, text, key):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = "Bearer " + key
    body = None if text is None else json.dumps({"model": "any", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(url, data=body and body.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            answer = json.loads(reply.read())
            return 200, answer["choices"][0]["message"]["content"] if text is not None else ""
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError as error:
        return "unreachable", ""


def chat(text):
    return call(BASE + "/chat/completions", text, KEY)[1]


def connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "reached"
    except OSError:
        return "unreachable"


if os.environ["BENCHMAX_ROLLOUT_ID"].endswith("-0"):
    chat("victim " + BASE)
    calls = 1
    while time.monotonic() < deadline:
        calls += 1
        if chat("done?") == "yes":
            break
        time.sleep(0.1)
    print(json.dumps({"role": "victim", "calls": calls}))
else:
    calls, victim = 0, "none"
    while victim == "none" and time.monotonic() < deadline:
        calls += 1
        victim = chat("victim?")
        if victim == "none":
            time.sleep(0.1)
    origin = BASE.split("/r/", 1)[0]
    victim = origin + "/r/" + victim.split("/r/", 1)[1]  # the victim's slot, on the proxy this sandbox reaches
    found = {
        "role": "attacker",
        "own_slot_own_key": call(BASE + "/models", None, KEY)[0],
        "victim_slot_own_key": call(victim + "/chat/completions", "steal", KEY)[0],
        "victim_models_own_key": call(victim + "/models", None, KEY)[0],
        "victim_slot_no_key": call(victim + "/chat/completions", "steal", None)[0],
        "model_server": connect(example["model_port"]),
        "other_host_port": connect(example["other_port"]),
    }
    chat("done")
    print(json.dumps(found))
"""


class _Rendezvous:
    """The model's side of the test: it learns the victim's base URL and tells the attacker, as a
    leaked URL would (in a log, a reply); what the attacker never learns is the victim's key."""

    def __init__(self) -> None:
        self.victim = "none"
        self.done = False

    def __call__(self, body: dict) -> dict:
        text = body["messages"][-1]["content"]
        if text.startswith("victim "):
            self.victim = text.split(" ", 1)[1]
            return {"content": "noted"}
        if text == "victim?":
            return {"content": self.victim}
        if text == "done":
            self.done = True
        return {"content": "yes" if self.done else "no"}


class _Unbudgeted(ScoredAgents):
    max_calls = None


async def test_a_sandboxed_agent_reaches_neither_another_rollouts_lease_nor_another_host_port(
    run_group, scripted_server
):
    """Two sibling rollouts, each in its sandbox behind the same proxy: the attacker learns the
    victim's URL (its slot) but its own key does not open it, nothing it sends there is recorded
    or forwarded, and no host port but the proxy's is reachable from inside."""
    import json
    import socket
    import sys

    scripted_server.policy = _Rendezvous()
    with socket.create_server(("127.0.0.1", 0)) as other:
        env = _Unbudgeted(command=[sys.executable, "-c", _PROBE], sandbox=SPEC)
        item = example(model_port=scripted_server.port, other_port=other.getsockname()[1])
        outcomes = await run_group(env, item, n=2)
    assert [outcome.termination_reason for outcome in outcomes] == [TerminationReason.FINISHED] * 2, [
        outcome.error for outcome in outcomes
    ]
    victim, attacker = (json.loads(outcome.messages[-1]["content"]) for outcome in outcomes)
    assert attacker == {
        "role": "attacker",
        "own_slot_own_key": 200,
        "victim_slot_own_key": 401,
        "victim_models_own_key": 401,
        "victim_slot_no_key": 401,
        "model_server": "unreachable",
        "other_host_port": "unreachable",
    }
    assert victim["role"] == "victim"
    assert len(outcomes[0].turns) == victim["calls"]  # the victim's lease holds its own calls only
    assert not any(request["messages"][-1]["content"] == "steal" for request in scripted_server.requests)
