"""An agent command in the bwrap sandbox: the proxy is its one way out, through the Unix-socket relay."""

from __future__ import annotations

import pytest
from agent_helpers import COMMAND, SCRIPT, TOOL_THEN_ANSWER, ScoredAgents, example

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
