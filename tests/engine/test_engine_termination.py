"""Every termination reason, produced end to end against the scripted server."""

from __future__ import annotations

import asyncio

import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import SCORABLE_REASONS, BaseEnv, ListDataset, TerminationReason

FAST_RETRY = RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)


class CountingEnv(BaseEnv):
    """One ``step`` tool; records which rollouts were scored and with what reason."""

    max_turns = 3

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.scored: list[tuple[str, str]] = []
        self.tool_runs = 0

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        self.tool_runs += 1
        if "seconds" in args:
            await asyncio.sleep(args["seconds"])
        return "stepped"

    async def compute_reward(self, rollout):
        self.scored.append((rollout.rollout_id, rollout.termination_reason))
        return {"len": float(len(rollout.messages))}


STEP = {"tool_calls": [{"name": "step"}]}


async def run(make_engine, make_request, steps, *, env=None, config=None, **request_kwargs):
    env = env or CountingEnv()
    engine = make_engine(env, config or EngineConfig(retry=FAST_RETRY))
    result = await engine.run_group([make_request(steps, **request_kwargs)])
    return env, result.outcomes[0]


def test_the_vocabulary_is_closed_and_documented():
    assert {reason.value for reason in TerminationReason} >= {
        "finished",
        "max_turns_exceeded",
        "tool_budget_exceeded",
        "output_exceeded",
        "context_exceeded",
        "model_error",
        "tool_error",
        "timeout",
        "reward_error",
        "group_reward_error",
        "cancelled",
    }
    assert {
        "finished",
        "max_turns_exceeded",
        "tool_budget_exceeded",
        "output_exceeded",
        "context_exceeded",
    } == SCORABLE_REASONS


async def test_a_final_answer_finishes_and_is_scored(make_engine, make_request):
    _env, outcome = await run(make_engine, make_request, [STEP, {"content": "done"}])
    assert (outcome.termination_reason, outcome.error) == ("finished", None)
    assert outcome.rewards == {"len": 4.0}
    assert [turn.finish_reason for turn in outcome.turns] == ["tool_calls", "stop"]


async def test_still_calling_tools_after_max_turns_is_max_turns_exceeded_and_scored(
    make_engine, make_request, scripted_server
):
    env, outcome = await run(make_engine, make_request, [STEP, STEP, STEP, {"content": "late"}])
    assert outcome.termination_reason == "max_turns_exceeded"
    assert len(scripted_server.requests) == 3
    assert env.tool_runs == 3
    assert outcome.messages[-1]["role"] == "tool"
    assert env.scored == [(outcome.rollout_id, "max_turns_exceeded")]
    assert outcome.rewards == {"len": 7.0}


async def test_asking_for_more_tool_calls_than_are_left_is_tool_budget_exceeded_and_scored(
    make_engine, make_request, scripted_server
):
    two = {"tool_calls": [{"name": "step"}, {"name": "step"}]}
    env = CountingEnv(max_tool_calls=2)
    env, outcome = await run(make_engine, make_request, [STEP, two, {"content": "x"}], env=env)
    assert outcome.termination_reason == "tool_budget_exceeded"
    assert outcome.error == "turn 1 asked for 2 tool calls with 1 of max_tool_calls=2 left"
    assert env.tool_runs == 1
    assert len(scripted_server.requests) == 2
    assert outcome.rewards == {"len": 4.0}
    assert len(outcome.messages[-1]["tool_calls"]) == 2


async def test_max_tool_calls_zero_stops_the_first_tool_call(make_engine, make_request):
    env, outcome = await run(make_engine, make_request, [STEP, {"content": "x"}], env=CountingEnv(max_tool_calls=0))
    assert outcome.termination_reason == "tool_budget_exceeded"
    assert env.tool_runs == 0
    assert outcome.rewards


async def test_finish_reason_length_is_output_exceeded_and_scored(make_engine, make_request):
    steps = [{"content": "a very long answ", "finish_reason": "length"}]
    _env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "output_exceeded"
    assert outcome.messages[-1] == {"role": "assistant", "content": "a very long answ"}
    assert outcome.rewards == {"len": 2.0}


VLLM_CONTEXT = {
    "object": "error",
    "message": "This model's maximum context length is 2048 tokens. However, you requested "
    "2100 tokens (2000 in the messages, 100 in the completion). Please reduce the length "
    "of the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
LLAMA_CPP_CONTEXT = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 5000,
        "n_ctx": 4096,
    }
}
LLAMA_CPP_PYTHON_CONTEXT = {
    "error": {
        "message": "Requested tokens (5000) exceed context window of 2048",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }
}


@pytest.mark.parametrize(
    "refusal",
    [
        {"error": "context"},
        {"status": 400, "body": VLLM_CONTEXT},
        {"status": 400, "body": LLAMA_CPP_CONTEXT},
        {"status": 400, "body": LLAMA_CPP_PYTHON_CONTEXT},
        {"status": 413, "body": {"detail": "input is too long for this model"}},
    ],
    ids=["openai", "vllm", "llama.cpp", "llama-cpp-python", "413-detail"],
)
async def test_a_prompt_refused_as_too_long_is_context_exceeded_and_scored(
    make_engine, make_request, scripted_server, refusal
):
    env, outcome = await run(make_engine, make_request, [STEP, refusal])
    assert outcome.termination_reason == "context_exceeded"
    assert outcome.error.startswith(f"HTTP {refusal.get('status', 400)}: ")
    assert len(scripted_server.requests) == 2
    assert env.scored == [(outcome.rollout_id, "context_exceeded")]
    assert [turn.finish_reason for turn in outcome.turns] == ["tool_calls"]
    assert outcome.rewards == {"len": 3.0}


async def test_a_plain_400_is_a_model_error_without_retries(make_engine, make_request, scripted_server):
    env, outcome = await run(make_engine, make_request, [{"status": 400, "message": "bad role"}])
    assert outcome.termination_reason == "model_error"
    assert "HTTP 400" in outcome.error and "bad role" in outcome.error
    assert len(scripted_server.requests) == 1
    assert outcome.rewards == {}
    assert env.scored == []


@pytest.mark.parametrize("status", [401, 403, 404, 422])
async def test_non_retryable_client_errors_fail_fast(make_engine, make_request, scripted_server, status):
    clock = asyncio.get_running_loop().time()
    steps = [{"fail": {"status": status, "times": 5}, "content": "never"}]
    _env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "model_error"
    assert outcome.error.startswith(f"HTTP {status}")
    assert len(scripted_server.requests) == 1
    assert asyncio.get_running_loop().time() - clock < 1


async def test_a_request_that_keeps_failing_with_500_is_retried_then_model_error(
    make_engine, make_request, scripted_server
):
    steps = [{"fail": {"status": 500, "times": 99}, "content": "never"}]
    env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "model_error"
    assert "HTTP 500" in outcome.error
    assert "gave up after 3 attempts" in outcome.error
    assert len(scripted_server.requests) == 3
    assert outcome.rewards == {} and env.scored == []


@pytest.mark.parametrize("status", [502, 503])
async def test_an_endpoint_that_answers_every_request_with_a_gateway_error_is_an_outage(
    make_engine, make_request, scripted_server, status
):
    # The endpoint itself is unwell: the rollout waits (no retries spent) and, past the
    # outage budget, ends as model_error naming the outage.
    steps = [{"fail": {"status": status, "times": 999}, "content": "never"}]
    config = EngineConfig(retry=FAST_RETRY, max_outage=0.5)
    env, outcome = await run(make_engine, make_request, steps, config=config)
    assert outcome.termination_reason == "model_error"
    assert f"HTTP {status}" in outcome.error and "past the outage budget of 0.5 s" in outcome.error
    assert outcome.rewards == {} and env.scored == []


async def test_malformed_bodies_are_retried_then_model_error(make_engine, make_request, scripted_server):
    steps = [{"fail": {"malformed": True, "times": 99}, "content": "never"}]
    _env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "model_error"
    assert "malformed completion: invalid JSON" in outcome.error
    assert scripted_server.counts["malformed"] == 3
    assert outcome.rewards == {}


@pytest.mark.parametrize(
    "fault",
    [{"status": 503}, {"status": 429}, {"malformed": True}, {"reset": True}],
    ids=["503", "429", "malformed", "reset"],
)
async def test_a_transient_fault_is_retried_and_the_rollout_finishes(make_engine, make_request, scripted_server, fault):
    steps = [{"fail": {**fault, "times": 2}, "content": "fine"}]
    _env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "finished"
    assert outcome.messages[-1]["content"] == "fine"
    assert outcome.rewards == {"len": 2.0}
    retries = [entry for entry in outcome.logs if entry.logger == "benchmax.client"]
    assert len(retries) == 2
    assert all(entry.level == "WARNING" and entry.phase == "model" for entry in retries)


async def test_a_slow_model_reply_is_timeout_after_the_request_limit(make_engine, make_request, scripted_server):
    config = EngineConfig(request_timeout=0.3, retry=RetryPolicy(max_attempts=2, backoff_initial=0.01))
    clock = asyncio.get_running_loop().time()
    _env, outcome = await run(make_engine, make_request, [{"sleep": 3, "content": "slow"}], config=config)
    assert asyncio.get_running_loop().time() - clock < 2
    assert outcome.termination_reason == "timeout"
    assert "no reply within 0.3s" in outcome.error
    assert len(scripted_server.requests) == 2
    assert outcome.rewards == {}


async def test_a_rollout_past_its_limit_is_timeout_naming_the_phase(make_engine, make_request):
    config = EngineConfig(rollout_timeout=0.3, tool_timeout=None, retry=FAST_RETRY)
    steps = [{"tool_calls": [{"name": "step", "arguments": {"seconds": 5}}]}, {"content": "x"}]
    clock = asyncio.get_running_loop().time()
    env, outcome = await run(make_engine, make_request, steps, config=config)
    assert asyncio.get_running_loop().time() - clock < 2
    assert outcome.termination_reason == "timeout"
    assert outcome.error == "rollout ran past its 0.3s limit (during tools)"
    assert outcome.rewards == {} and env.scored == []


async def test_a_cancelled_await_inside_env_code_is_cancelled(make_engine, make_request):
    class Cancels(CountingEnv):
        async def run_tool(self, rollout_id, tool_name, **args):
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            await future

    env, outcome = await run(make_engine, make_request, [STEP, {"content": "x"}], env=Cancels())
    assert outcome.termination_reason == "cancelled"
    assert outcome.rewards == {} and env.scored == []


async def test_an_unusable_completion_shape_is_a_model_error(make_engine, make_request, scripted_server):
    steps = [{"status": 200, "body": {"choices": []}}]
    _env, outcome = await run(make_engine, make_request, steps)
    assert outcome.termination_reason == "model_error"
    assert "malformed completion: no choices" in outcome.error
    assert len(scripted_server.requests) == 3
