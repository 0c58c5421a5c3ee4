"""Servers as they are met (no ``/models``, an HTML error page, one 503, other model names) on
the paths that meet them: a trainer's ``Engine.run_group``, the vLLM server policy's reading of
``/models``, and the rule that picks the model name (the CLI's side is in ``tests/cli``)."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from benchmax.client import ModelError, ModelNotServed, RetryPolicy, choose_model
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, Example, ListDataset, RolloutRequest, TerminationReason, canonical_example_id
from benchmax.testing import ScriptedServer

# What GET /v1/models does, as ScriptedServer options.
ROUTES: dict[str, dict[str, Any]] = {
    "lists-models": {},
    "lists-other-names": {"models": ("served-model",)},
    "no-route": {"models": None},
    "404-html": {"models_status": 404},
    "405-html": {"models_status": 405},
    "501-html": {"models_status": 501},
}
NO_LIST = ("no-route", "404-html", "405-html", "501-html")


class OneTurnEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return []

    async def compute_reward(self, rollout):
        return {"answered": 1.0}


def _requests(server: ScriptedServer, count: int, *, model: str = "scripted") -> list[RolloutRequest]:
    payload = {"prompt_messages": [{"role": "user", "content": "question"}]}
    example = Example(canonical_example_id(payload), payload)
    return [
        RolloutRequest(rollout_id=f"r{index}", example=example, model=model, base_url=server.base_url)
        for index in range(count)
    ]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_one_transient_503_costs_one_retry_in_run_group_whatever_routes_the_server_has(route):
    # The trainer's path: Engine.run_group with the default outage budget (600 s). A 503
    # makes the gate probe GET /models; a 501 page there read as "down" held the group
    # for the whole budget. The wait_for only turns such a hold into a failure.
    with ScriptedServer(fail_first=(503,), **ROUTES[route]) as server:
        engine = Engine(OneTurnEnv(), EngineConfig())
        try:
            result = await asyncio.wait_for(engine.run_group(_requests(server, 1)), 60)
            stats = engine.clients.http(server.base_url).stats
            outages = engine.clients.http(server.base_url).gate.all_outages()
        finally:
            await engine.aclose()

    outcome = result.outcomes[0]
    assert (outcome.termination_reason, outcome.error) == (TerminationReason.FINISHED, None)
    assert outcome.rewards == {"answered": 1.0}
    assert server.counts["status_503"] == 1
    assert server.counts["requests"] == 2, "the 503, then one retry"
    assert dict(stats.retries) == {"http_503": 1}
    assert outages == [], "one 503 is no outage"


@pytest.mark.parametrize("route", ["lists-models", "501-html"])
async def test_run_group_never_waits_on_an_outage_longer_than_engine_config_max_outage(route):
    # A server that answers 503 to every chat request and whose GET /models hangs: the
    # gate's probe (5 s each) used to run on top of the trainer's budget, twice.
    budget = 0.5
    with ScriptedServer(fail_first=(503,) * 1000, models_delay=30, **ROUTES[route]) as server:
        engine = Engine(OneTurnEnv(), EngineConfig(max_outage=budget, retry=RetryPolicy(max_attempts=2)))
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(engine.run_group(_requests(server, 2)), 60)
        finally:
            waited = time.monotonic() - started
            outages = engine.clients.http(server.base_url).gate.all_outages()
            await engine.aclose()

    assert {outcome.termination_reason for outcome in result.outcomes} == {TerminationReason.MODEL_ERROR}
    assert all("past the outage budget of 0.5 s" in (outcome.error or "") for outcome in result.outcomes)
    assert len(outages) == 1 and outages[0].failed
    # Two probes of 5 s each made this >= 10 s before; the budget is 0.5 s.
    assert waited < 5.0, f"waited {waited:.1f} s on a {budget} s outage budget"


@pytest.mark.parametrize(
    ("fault", "attempts", "reason"),
    [
        ({"times": 1}, 2, TerminationReason.FINISHED),
        ({"times": 99}, 3, TerminationReason.MODEL_ERROR),
    ],
    ids=["once", "always"],
)
async def test_a_reply_with_no_choices_is_retried_and_fails_as_model_error_once_the_attempts_are_spent(
    fault, attempts, reason
):
    # Kept on purpose, unlike 0.2.5 (model_error at once): see docs/migrating.md.
    body = {"id": "gen-1", "object": "chat.completion", "error": {"message": "Provider returned error", "code": 502}}
    script = f'#script: [{{"fail": {{"body": {json.dumps(body)}, "times": {fault["times"]}}}, "content": "ok"}}]'
    payload = {"prompt_messages": [{"role": "user", "content": f"question\n{script}"}]}
    with ScriptedServer() as server:
        engine = Engine(OneTurnEnv(), EngineConfig(retry=RetryPolicy(max_attempts=3, backoff_initial=0.01)))
        request = RolloutRequest(
            rollout_id="r0",
            example=Example(canonical_example_id(payload), payload),
            model="scripted",
            base_url=server.base_url,
        )
        try:
            outcome = (await engine.run_group([request])).outcomes[0]
        finally:
            await engine.aclose()

    assert outcome.termination_reason == reason
    assert server.counts["requests"] == attempts
    if reason == TerminationReason.MODEL_ERROR:
        assert "no choices (error: 502: Provider returned error)" in (outcome.error or "")
        assert "gave up after 3 attempts" in (outcome.error or "")


@pytest.mark.parametrize("route", list(ROUTES))
async def test_the_vllm_server_policy_reads_models_as_the_eval_preflight_does(route):
    # The trainer's own reading of /models (TRL's vLLM server mode): a server without the
    # route is served with the name given, and a name the server does not list is refused.
    from benchmax.train._vllm import VLLMServerPolicy

    tokenizer = SimpleNamespace(pad_token_id=0)  # reading /models needs no tokenizer
    with ScriptedServer(**ROUTES[route]) as server:
        given = VLLMServerPolicy(server.base_url, tokenizer, model="gpt-4o-mini")
        unnamed = VLLMServerPolicy(server.base_url, tokenizer)
        try:
            if route in NO_LIST:
                assert await given.context_limit() is None
                assert given.model == "gpt-4o-mini"
                assert await unnamed.context_limit() is None
                assert unnamed.model == "default"
            else:
                served = "served-model" if route == "lists-other-names" else "scripted"
                with pytest.raises(ModelNotServed, match=f"gpt-4o-mini: .* it serves {served}"):
                    await given.context_limit()
                await unnamed.context_limit()
                assert unnamed.model == served
        finally:
            await given.aclose()
            await unnamed.aclose()


@pytest.mark.parametrize(
    ("requested", "listed", "chosen"),
    [
        ("served-model", ["served-model"], "served-model"),
        (None, ["served-model"], "served-model"),
        (None, [], "default"),
        ("anything", [], "anything"),
        ("gpt-4o", ["gpt-4o-2024-08-06", "gpt-4o-mini"], "gpt-4o"),
        ("claude-3-5-sonnet-latest", ["claude-3-5-sonnet-20241022"], "claude-3-5-sonnet-latest"),
        ("llama3", ["llama3:latest"], "llama3"),
        ("llama3", ["llama3:8b"], "llama3"),
        ("gpt-4o", ["gpt-4o-mini"], ModelNotServed),
        ("gpt-4o-mini", ["served-model"], ModelNotServed),
        ("served", ["served-model"], ModelNotServed),
        (None, ["a", "b"], ModelNotServed),
    ],
)
def test_the_model_rule_takes_listed_names_and_their_aliases_and_refuses_the_rest(requested, listed, chosen):
    served = {"http://server/v1": listed}
    if isinstance(chosen, str):
        assert choose_model(requested, served) == chosen
    else:
        with pytest.raises(chosen):
            choose_model(requested, served)
        if requested is not None:
            assert choose_model(requested, served, check=False) == requested


def test_a_model_not_served_is_a_model_error_so_a_rollout_that_meets_it_ends_model_error():
    error = ModelNotServed("x")
    assert isinstance(error, ModelError)
    assert error.reason == TerminationReason.MODEL_ERROR
