"""Turns the env drives (``BaseEnv.env_response``): the loop, per-turn rewards, limits and failures.

Every rollout runs against the scripted OpenAI-compatible server on loopback. The env
reads what to do on each turn from the example (``plan``), so one env class covers
every turn kind (a plain reply, a tool turn) x every way its hook can go wrong.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import orjson
import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import (
    BaseEnv,
    EnvResponse,
    Example,
    ListDataset,
    RolloutFailure,
    TerminationReason,
    canonical_example_id,
)


def script_line(steps: list[dict]) -> str:
    return f"#script: {orjson.dumps(steps).decode()}"


FAST_RETRY = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


class TurnEnv(BaseEnv):
    """Answers each turn as ``example_args["plan"][turn]`` says; rollouts whose id ends in
    ``-ok`` always answer ``done`` (the healthy sibling of a failing one)."""

    max_turns = 4

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.seen: list[list[str]] = []
        self.scored: list[str] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return "stepped"

    async def env_response(self, rollout):
        turn = len(rollout.turns) - 1
        self.seen.append([message["role"] for message in rollout.messages])
        action = "done" if rollout.rollout_id.endswith("-ok") else rollout.example_args["plan"][turn]
        if action == "say":
            return EnvResponse([f"observation {turn}"], rewards={"step": float(turn)}, info=f"verdict {turn}")
        if action == "done":
            return EnvResponse(["well done"], rewards={"step": 10.0}, done=True, info="solved")
        if action == "none":
            return None
        if action == "raise":
            raise ValueError("the board is broken")
        if action == "wrong_type":
            return ("higher", 0.0, False)
        if action == "bad_role":
            return EnvResponse([{"role": "assistant", "content": "I win"}])
        if action == "bad_message":
            return EnvResponse([42])
        if action == "nan_reward":
            return EnvResponse(["x"], rewards={"step": math.nan})
        if action == "bad_done":
            return EnvResponse(["x"], done="yes")
        if action == "bad_info":
            return EnvResponse(["x"], info=["not", "text"])
        if action == "too_many":
            return EnvResponse(["x"] * 65)
        if action == "empty":
            return EnvResponse(rewards={"step": 1.0})
        if action == "sleep":
            await asyncio.sleep(30)
        if action == "failure":
            raise RolloutFailure("judge_error", "the referee is unreachable")
        if action == "huge":
            return EnvResponse(["A" * 5000, "B" * 5000])
        raise AssertionError(action)

    async def compute_reward(self, rollout):
        self.scored.append(rollout.rollout_id)
        return {"turns": float(len(rollout.turns))}


HOOK_LINE = TurnEnv.env_response.__code__.co_firstlineno
HOOK_AT = f"{Path(__file__).relative_to(Path.cwd()) if Path(__file__).is_relative_to(Path.cwd()) else __file__}"

PLAIN = {"content": "a guess"}
TOOL = {"tool_calls": [{"name": "step"}]}
TURN_KINDS = {"plain": PLAIN, "tool": TOOL}


def example(steps, plan):
    payload = {"prompt_messages": [{"role": "user", "content": f"play\n{script_line(steps)}"}], "plan": plan}
    return Example(canonical_example_id(payload), payload)


async def run(make_engine, make_request, steps, plan, *, env=None, config=None, rollout_ids=("r-main",)):
    env = env or TurnEnv()
    engine = make_engine(env, config or EngineConfig(retry=FAST_RETRY))
    shared = example(steps, plan)
    result = await engine.run_group([make_request(example=shared, rollout_id=rid) for rid in rollout_ids])
    return env, result.outcomes


# The loop.


async def test_the_env_answers_each_reply_until_it_says_done(make_engine, make_request, scripted_server):
    _env, (outcome,) = await run(make_engine, make_request, [PLAIN, PLAIN, PLAIN], ["say", "say", "done"])
    assert (outcome.termination_reason, outcome.error) == ("finished", None)
    assert [message["role"] for message in outcome.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [message["content"] for message in outcome.messages if message["role"] == "user"][1:] == [
        "observation 0",
        "observation 1",
        "well done",
    ]
    assert [turn.rewards for turn in outcome.turns] == [{"step": 0.0}, {"step": 1.0}, {"step": 10.0}]
    assert [turn.env_info for turn in outcome.turns] == ["verdict 0", "verdict 1", "solved"]
    assert [turn.env_messages for turn in outcome.turns] == [1, 1, 1]
    assert outcome.rewards == {"turns": 3.0}
    # the model saw each observation: request n holds n env messages
    assert [sum(m["role"] == "user" for m in request["messages"]) for request in scripted_server.requests] == [1, 2, 3]


async def test_tool_results_come_before_the_env_s_observation(make_engine, make_request):
    env, (outcome,) = await run(make_engine, make_request, [TOOL, PLAIN], ["say", "done"])
    assert outcome.termination_reason == "finished"
    assert [message["role"] for message in outcome.messages] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "user",
    ]
    assert env.seen[0] == ["user", "assistant", "tool"]
    assert outcome.turns[0].tool_calls == 1 and outcome.turns[0].rewards == {"step": 0.0}


async def test_done_after_a_tool_turn_ends_the_episode_after_the_tool_results(make_engine, make_request):
    _env, (outcome,) = await run(make_engine, make_request, [TOOL, PLAIN], ["done"])
    assert outcome.termination_reason == "finished"
    assert [message["role"] for message in outcome.messages] == ["user", "assistant", "tool", "user"]
    assert len(outcome.turns) == 1


async def test_none_keeps_the_loop_without_the_hook(make_engine, make_request):
    """None after a tool turn: the model goes on; None after a plain reply: it finishes, as in 0.2.x."""
    _env, (outcome,) = await run(make_engine, make_request, [TOOL, PLAIN], ["none", "none"])
    assert outcome.termination_reason == "finished"
    assert [message["role"] for message in outcome.messages] == ["user", "assistant", "tool", "assistant"]
    assert [turn.rewards for turn in outcome.turns] == [None, None]


async def test_an_env_that_never_ends_stops_at_max_turns_and_is_scored(make_engine, make_request, scripted_server):
    env, (outcome,) = await run(make_engine, make_request, [PLAIN] * 10, ["say"] * 10)
    assert outcome.termination_reason == "max_turns_exceeded"
    assert len(scripted_server.requests) == TurnEnv.max_turns
    assert len(outcome.turns) == TurnEnv.max_turns
    assert env.scored == ["r-main"]
    assert outcome.rewards == {"turns": 4.0}


async def test_an_env_without_the_hook_records_no_turn_rewards(make_engine, make_request):
    class Plain(TurnEnv):
        env_response = BaseEnv.env_response

    _env, (outcome,) = await run(make_engine, make_request, [TOOL, PLAIN], [], env=Plain())
    assert outcome.termination_reason == "finished"
    assert [message["role"] for message in outcome.messages] == ["user", "assistant", "tool", "assistant"]
    assert [(turn.rewards, turn.env_messages, turn.env_info) for turn in outcome.turns] == [(None, 0, None)] * 2


async def test_observation_text_is_bounded_like_tool_results(make_engine, make_request, scripted_server):
    config = EngineConfig(retry=FAST_RETRY, max_tool_result_chars=3000)
    _env, (outcome,) = await run(make_engine, make_request, [PLAIN, PLAIN], ["huge", "done"], config=config)
    first, second = outcome.messages[2]["content"], outcome.messages[3]["content"]
    assert first.startswith("A" * 3000) and "[truncated 2000 chars]" in first
    assert second.startswith("…[truncated 5000 chars]")
    sent = scripted_server.requests[1]["messages"]
    assert sum(len(m["content"]) for m in sent if m["role"] == "user") < 3200


# Failures: every turn kind x every way the hook goes wrong, each beside a healthy sibling.

FAILURES = {
    "raise": ("env_response_error", "raised ValueError at "),
    "wrong_type": ("env_response_error", "returned tuple; return an EnvResponse"),
    "bad_role": ("env_response_error", "role 'assistant'"),
    "bad_message": ("env_response_error", "messages[0] of type int"),
    "nan_reward": ("env_response_error", "rewards must be finite"),
    "bad_done": ("env_response_error", "done must be True or False"),
    "bad_info": ("env_response_error", "info must be a string"),
    "too_many": ("env_response_error", "65 messages"),
    "sleep": ("timeout", "ran past its 0.2s limit"),
    "failure": ("judge_error", "the referee is unreachable"),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("kind", sorted(TURN_KINDS))
async def test_a_failing_hook_ends_its_rollout_alone_naming_the_hook(make_engine, make_request, kind, failure):
    config = EngineConfig(retry=FAST_RETRY, env_response_timeout=0.2)
    env, (bad, good) = await run(
        make_engine, make_request, [TURN_KINDS[kind], PLAIN], [failure], config=config, rollout_ids=("r-bad", "r-ok")
    )
    reason, detail = FAILURES[failure]
    assert bad.termination_reason == reason
    assert detail in bad.error
    if failure != "failure":  # the env's own RolloutFailure carries its own message
        assert f"TurnEnv.env_response ({HOOK_AT}:{HOOK_LINE})" in bad.error
    assert bad.rewards == {}
    assert (good.termination_reason, good.rewards) == ("finished", {"turns": 1.0})
    assert env.scored == ["r-ok"]
    if failure == "raise":
        assert any("the board is broken" in (log.traceback or "") and log.phase == "env" for log in bad.logs)


async def test_no_observation_and_not_done_after_a_plain_reply_is_refused(make_engine, make_request):
    _env, (outcome,) = await run(make_engine, make_request, [PLAIN, PLAIN], ["empty"])
    assert outcome.termination_reason == "env_response_error"
    assert "asked again with nothing new" in outcome.error


async def test_no_observation_after_a_tool_turn_goes_on_and_keeps_the_reward(make_engine, make_request):
    _env, (outcome,) = await run(make_engine, make_request, [TOOL, PLAIN], ["empty", "done"])
    assert outcome.termination_reason == "finished"
    assert [turn.rewards for turn in outcome.turns] == [{"step": 1.0}, {"step": 10.0}]
    assert outcome.turns[0].env_messages == 0


# Every termination reason a rollout with env turns can end with, after an env turn of each kind.

LENGTH = {"content": "cut", "finish_reason": "length"}
CONTEXT = {"error": "context"}
BROKEN = {"status": 400, "message": "bad request"}
REASONS = {
    # reason: (steps after the first turn, plan, env kwargs, config kwargs)
    "finished": ([PLAIN], ["say", "done"], {}, {}),
    "max_turns_exceeded": ([PLAIN] * 5, ["say"] * 5, {}, {}),
    "tool_budget_exceeded": ([TOOL, TOOL], ["say", "say", "say"], {"max_tool_calls": 1}, {}),
    "output_exceeded": ([LENGTH], ["say", "none"], {}, {}),
    "context_exceeded": ([CONTEXT], ["say"], {}, {}),
    "model_error": ([BROKEN], ["say"], {}, {}),
    "timeout": ([PLAIN], ["say", "sleep"], {}, {"env_response_timeout": 0.2}),
    "env_response_error": ([PLAIN], ["say", "raise"], {}, {}),
}


@pytest.mark.parametrize("reason", sorted(REASONS))
@pytest.mark.parametrize("kind", sorted(TURN_KINDS))
async def test_each_termination_reason_after_an_env_turn(make_engine, make_request, kind, reason):
    steps, plan, env_kwargs, config_kwargs = REASONS[reason]
    if reason == "tool_budget_exceeded" and kind == "tool":
        env_kwargs = {"max_tool_calls": 1}
        steps = [TOOL]
    env = TurnEnv(**env_kwargs)
    config = EngineConfig(retry=FAST_RETRY, **config_kwargs)
    env, (outcome,) = await run(make_engine, make_request, [TURN_KINDS[kind], *steps], plan, env=env, config=config)
    assert outcome.termination_reason == reason
    assert outcome.turns[0].rewards == {"step": 0.0}  # the first env turn was recorded whatever came after
    assert outcome.messages[2 if kind == "plain" else 3] == {"role": "user", "content": "observation 0"}
    scored = reason in {
        TerminationReason.FINISHED,
        TerminationReason.MAX_TURNS_EXCEEDED,
        TerminationReason.TOOL_BUDGET_EXCEEDED,
        TerminationReason.OUTPUT_EXCEEDED,
        TerminationReason.CONTEXT_EXCEEDED,
    }
    assert bool(outcome.rewards) is scored
    assert env.scored == (["r-main"] if scored else [])


async def test_the_rollout_deadline_covers_env_turns(make_engine, make_request):
    config = EngineConfig(retry=FAST_RETRY, env_response_timeout=None, rollout_timeout=0.5)
    _env, (outcome,) = await run(make_engine, make_request, [PLAIN, PLAIN], ["sleep"], config=config)
    assert outcome.termination_reason == "timeout"
    assert "during env" in outcome.error


async def test_a_reply_cut_for_length_is_answered_and_the_game_goes_on(make_engine, make_request):
    _env, (outcome,) = await run(make_engine, make_request, [LENGTH, PLAIN], ["say", "done"])
    assert (outcome.termination_reason, outcome.error) == ("finished", None)
    assert [turn.finish_reason for turn in outcome.turns] == ["length", "stop"]
    assert outcome.messages[2] == {"role": "user", "content": "observation 0"}


async def test_a_reply_cut_for_length_that_the_env_leaves_unanswered_stays_output_exceeded(make_engine, make_request):
    env, (outcome,) = await run(make_engine, make_request, [LENGTH, PLAIN], ["none"])
    assert outcome.termination_reason == "output_exceeded"
    assert env.seen == [["user", "assistant"]]  # the env was asked, and said nothing


async def test_a_synchronous_hook_is_refused_before_any_model_call(make_engine, make_request, scripted_server):
    from benchmax.envs import EnvDefinitionError

    class Sync(TurnEnv):
        def env_response(self, rollout):
            return EnvResponse(["x"])

    where = r"Sync.env_response \(.*test_engine_env_turns.py:\d+\)"
    with pytest.raises(EnvDefinitionError, match=where + " must be a coroutine"):
        await run(make_engine, make_request, [PLAIN], ["say"], env=Sync())
    assert scripted_server.requests == []
