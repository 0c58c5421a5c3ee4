"""AgentEnv end to end: a real engine, the recording proxy, the scripted server, real subprocesses."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agent_helpers import COMMAND, TOOL_THEN_ANSWER, ScoredAgents, example

from benchmax.agents import AGENT_ERROR, ANSWER_NAME
from benchmax.envs import EnvDefinitionError, TerminationReason

ADD = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {}, "b": {}}}},
}


def sdk(base_url: str, api_key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, http_client=httpx.AsyncClient(trust_env=False)
    )


async def tool_agent(item: dict[str, Any], base_url: str, api_key: str) -> str:
    """A plain openai-SDK tool loop, as an author writes it."""
    logging.getLogger("my.agent").info("solving %s", item["answer"])
    messages: list[dict[str, Any]] = list(item["prompt_messages"])
    async with sdk(base_url, api_key) as client:
        for _ in range(5):
            reply = await client.chat.completions.create(model="m", messages=messages, tools=[ADD])
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                args = json.loads(call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(args["a"] + args["b"])})
    raise AssertionError("no answer")


@pytest.mark.parametrize("kind", ["function", "command"])
async def test_an_agent_program_becomes_a_scored_rollout_with_its_turns_and_logs(run_group, kind):
    env = ScoredAgents(agent=tool_agent) if kind == "function" else ScoredAgents(command=COMMAND)
    outcomes = await run_group(env, example(TOOL_THEN_ANSWER), n=2)
    for outcome in outcomes:
        assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
        assert outcome.rewards == {"correct": 1.0, "calls": 2.0}
        assert [turn.finish_reason for turn in outcome.turns] == ["tool_calls", "stop"]
        assert [turn.tool_calls for turn in outcome.turns] == [1, 0]
        assert [turn.sequence for turn in outcome.turns] == [0, 0]
        assert all(turn.usage.total_tokens > 0 and turn.model_seconds > 0 for turn in outcome.turns)
        assert [message["role"] for message in outcome.messages] == ["user", "assistant", "tool", "assistant"]
        assert outcome.messages[-1]["content"] == "5"
        logged = [(entry.logger, entry.message) for entry in outcome.logs]
        if kind == "function":
            assert ("my.agent", "solving 5") in logged
        else:
            assert ("benchmax.agents.stderr", "agent starting in mode tools") in logged
    assert env.group_sizes == [2]


async def test_an_agent_commands_stderr_lines_sit_between_the_turns_they_were_written_between(run_group):
    outcome, *_ = await run_group(ScoredAgents(command=COMMAND), example(TOOL_THEN_ANSWER))

    assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
    placed = {entry.message: (entry.phase, entry.turn) for entry in outcome.logs if entry.logger.endswith("stderr")}
    assert placed == {
        "agent starting in mode tools": ("context", 0),  # before its first call
        "turn 0: add = 5": ("tools", 0),  # after turn 0's reply, before turn 1's call
        "answered": ("context", 1),  # after the last turn
    }
    files = {entry.file for entry in outcome.logs if entry.logger.endswith("stderr")}
    assert files == {str(Path(COMMAND[-1]).resolve())}, "the agent's own file, not benchmax's reader"


async def test_an_agent_whose_answer_is_not_its_last_reply_has_it_appended(run_group):
    async def shouting(item: dict[str, Any], base_url: str, api_key: str) -> str:
        async with sdk(base_url, api_key) as client:
            reply = await client.chat.completions.create(model="m", messages=item["prompt_messages"])
        return f"{reply.choices[0].message.content}!"

    (outcome,) = await run_group(ScoredAgents(agent=shouting), example([{"content": "5"}]))
    assert outcome.messages[-1] == {"role": "assistant", "content": "5!", "name": ANSWER_NAME}
    assert outcome.rewards["correct"] == 0.0


async def test_calls_that_do_not_extend_one_another_are_separate_sequences(run_group):
    """A main loop, a sub-agent with its own history, then the main loop again: sequences 0, 1, 0."""

    async def with_subagent(item: dict[str, Any], base_url: str, api_key: str) -> str:
        async with sdk(base_url, api_key) as client:
            main = list(item["prompt_messages"])
            first = await client.chat.completions.create(model="m", messages=main)
            main.append({"role": "assistant", "content": first.choices[0].message.content})
            sub = [{"role": "user", "content": "summarise: the sum of two and three"}]
            summary = await client.chat.completions.create(model="m", messages=sub)
            main.append({"role": "user", "content": f"the helper says {summary.choices[0].message.content}"})
            last = await client.chat.completions.create(model="m", messages=main)
        return last.choices[0].message.content or ""

    (outcome,) = await run_group(ScoredAgents(agent=with_subagent), example())
    assert outcome.termination_reason == TerminationReason.FINISHED
    assert [turn.sequence for turn in outcome.turns] == [0, 1, 0]
    assert outcome.messages[0]["content"].startswith("what is 2+3?")  # the last call's history: the main loop


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize(
    ("mode", "reason", "calls", "scored"),
    [
        ("crash", AGENT_ERROR, 1, False),
        ("hang", TerminationReason.TIMEOUT, 1, False),
        ("flood", TerminationReason.MAX_TURNS_EXCEEDED, 3, True),
        ("binary", TerminationReason.FINISHED, 1, True),
    ],
)
async def test_a_misbehaving_command_ends_with_its_reason_and_keeps_its_calls(run_group, mode, reason, calls, scored):
    env = ScoredAgents(command=COMMAND, max_calls=3, timeout=3.0)
    (outcome,) = await run_group(env, example([{"content": "5"}] * 5, mode=mode))
    assert outcome.termination_reason == reason, outcome.error
    assert len(outcome.turns) == calls
    assert outcome.scored is scored
    stderr = [entry.message for entry in outcome.logs if entry.logger == "benchmax.agents.stderr"]
    if mode == "crash":
        assert "boom, the agent fell over" in outcome.error and "status 3" in outcome.error
        assert outcome.rewards == {}
    elif mode == "hang":
        (line,) = [line for line in stderr if line.startswith("child pid")]
        assert _dead(int(line.split()[-1])), "the agent's child outlived the rollout"
    elif mode == "flood":
        assert any("max_calls_exceeded" in line for line in stderr)
    else:
        assert outcome.messages[-1] == {"role": "assistant", "content": "5 \ufffd\ufffd", "name": ANSWER_NAME}
        assert "bad bytes \ufffd\ufffd on stderr" in stderr


async def test_a_function_agent_that_raises_is_an_agent_error_with_its_calls_and_traceback(run_group):
    async def crashing(item: dict[str, Any], base_url: str, api_key: str) -> str:
        async with sdk(base_url, api_key) as client:
            await client.chat.completions.create(model="m", messages=item["prompt_messages"])
        raise KeyError("no such field")

    (outcome,) = await run_group(ScoredAgents(agent=crashing), example([{"content": "5"}]))
    assert outcome.termination_reason == AGENT_ERROR
    assert "KeyError" in outcome.error and "no such field" in outcome.error
    assert len(outcome.turns) == 1 and not outcome.scored
    assert any(entry.traceback and "no such field" in entry.traceback for entry in outcome.logs)


async def test_a_key_of_another_rollout_is_refused_and_nothing_crosses(run_group):
    """Two concurrent rollouts swap keys: both swapped calls are refused, each keeps only its own call."""
    leases: dict[str, tuple[str, str]] = {}
    import asyncio

    both = asyncio.Event()

    async def swapping(item: dict[str, Any], base_url: str, api_key: str) -> str:
        me = os.urandom(4).hex()
        leases[me] = (base_url, api_key)
        if len(leases) == 2:
            both.set()
        await both.wait()
        (other_url, other_key) = next(value for name, value in leases.items() if name != me)
        for url, key in ((base_url, other_key), (other_url, api_key)):
            async with sdk(url, key) as client:
                with pytest.raises(openai.AuthenticationError):
                    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": me}])
        async with sdk(base_url, api_key) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[*item["prompt_messages"], {"role": "user", "content": me}]
            )
        return reply.choices[0].message.content or ""

    outcomes = await run_group(ScoredAgents(agent=swapping), example(), n=2)
    mine = set()
    for outcome in outcomes:
        assert outcome.termination_reason == TerminationReason.FINISHED, outcome.error
        assert len(outcome.turns) == 1
        mine.add(outcome.messages[1]["content"])
        assert outcome.messages[-1]["content"].endswith(outcome.messages[1]["content"])
    assert len(mine) == 2


def test_an_env_needs_exactly_one_program():
    with pytest.raises(EnvDefinitionError, match="exactly one"):
        ScoredAgents()
    with pytest.raises(EnvDefinitionError, match="exactly one"):
        ScoredAgents(agent=tool_agent, command=COMMAND)
    with pytest.raises(EnvDefinitionError, match="cannot be sandboxed"):
        ScoredAgents(agent=tool_agent, sandbox=True)


async def test_the_runs_rollout_timeout_bounds_the_agent_and_its_calls_are_kept(run_group):
    """No env timeout: the run's --rollout-timeout (less the scoring reserve) kills the hanging agent,
    before the engine's own deadline would have dropped the calls it made."""
    from benchmax.client import RetryPolicy
    from benchmax.engine import EngineConfig

    env = ScoredAgents(command=COMMAND)
    config = EngineConfig(rollout_timeout=4.0, retry=RetryPolicy(max_attempts=1))
    (outcome,) = await run_group(env, example([{"content": "5"}], mode="hang"), config=config)
    assert outcome.termination_reason == TerminationReason.TIMEOUT
    assert "3s limit" in outcome.error
    assert len(outcome.turns) == 1
