"""A run's ledger around real HTTP calls: counted by role and rollout, priced, answered from the cache."""

from __future__ import annotations

import orjson
import pytest

from benchmax.client import (
    CacheSettings,
    CallFigures,
    CallLedger,
    HttpModelClient,
    ModelError,
    ModelPrice,
    PriceTable,
    RetryPolicy,
    scoped_client,
)
from benchmax.envs.logging import rollout_context
from benchmax.testing import ScriptedServer

PRICES = PriceTable({"policy-model": ModelPrice(1.0, 2.0, 0.5), "judge-model": ModelPrice(3.0, 4.0)})


def body(text: str, model: str = "policy-model", **sampling: object) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0.0, **sampling}


def scripted(*steps: dict[str, object]) -> str:
    return f"#script: {orjson.dumps(list(steps)).decode()}"


@pytest.fixture
async def client(scripted_server: ScriptedServer):
    http = HttpModelClient(scripted_server.base_url, retry=RetryPolicy(max_attempts=3, backoff_initial=0.01))
    yield http
    await http.aclose()


@pytest.fixture
def ledger(tmp_path):
    made = CallLedger(prices=PRICES, cache=CacheSettings(tmp_path / "cache"))
    made.open()
    yield made
    made.close()


async def test_outside_a_run_the_client_is_left_as_it_is(client):
    assert scoped_client(client, role="policy") is client
    with pytest.raises(ValueError, match="role must be one of policy, judge"):
        scoped_client(client, role="critic")  # type: ignore[arg-type]


async def test_calls_are_counted_per_rollout_and_role_and_priced_with_the_servers_cached_tokens(client, ledger):
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "cached_tokens": 600}
    with ledger.group() as meter:
        policy = scoped_client(client, role="policy")
        await policy.chat(body(scripted({"content": "a", "usage": usage})), rollout_id="g#0")
        with rollout_context("g#0"):  # a judge inside the rollout's reward: its calls are the rollout's
            judge = scoped_client(client, role="judge")
            await judge.chat(body(scripted({"content": "b", "usage": usage}), model="judge-model"), rollout_id="grade")
        await scoped_client(client, role="judge").chat(
            body(scripted({"content": "c", "usage": usage}), model="judge-model"), rollout_id="rank"
        )  # a group hook's judge call: no rollout
    log = meter.log()
    (mine_policy, mine_judge) = sorted(log.of("g#0"), key=lambda item: item.role, reverse=True)
    assert (mine_policy.role, mine_policy.model, mine_policy.requests) == ("policy", "policy-model", 1)
    assert (mine_policy.prompt_tokens, mine_policy.completion_tokens, mine_policy.cached_tokens) == (1000, 100, 600)
    assert mine_policy.usd == pytest.approx((400 * 1.0 + 600 * 0.5 + 100 * 2.0) / 1e6)
    assert (mine_judge.role, mine_judge.model) == ("judge", "judge-model")
    assert mine_judge.usd == pytest.approx((1000 * 3.0 + 100 * 4.0) / 1e6), "no cached price: the prompt price"
    (group_judge,) = log.of(None)
    assert group_judge.role == "judge" and group_judge.requests == 1
    totals = {item.role: item for item in ledger.totals()}
    assert totals["judge"].requests == 2 and totals["policy"].requests == 1


async def test_a_repeated_request_is_answered_from_the_cache_at_no_cost(client, ledger, scripted_server):
    request = body(scripted({"content": "cached answer", "usage": {"prompt_tokens": 50, "completion_tokens": 5}}))
    with ledger.group() as first:
        sent = await scoped_client(client, role="policy").chat(request, rollout_id="r#0")
    with ledger.group() as second:
        again = await scoped_client(client, role="policy").chat(request, rollout_id="r#1")
    assert scripted_server.counts["requests"] == 1
    assert again == sent
    (missed,) = first.log().of("r#0")
    (hit,) = second.log().of("r#1")
    assert (missed.requests, missed.cache_misses, missed.cache_hits) == (1, 1, 0) and missed.usd > 0
    assert (hit.requests, hit.cache_misses, hit.cache_hits, hit.usd) == (0, 0, 1, 0.0)
    assert (hit.prompt_tokens, hit.completion_tokens) == (0, 0), "no tokens were spent on it"


async def test_judge_caching_can_be_switched_off_on_its_own(client, tmp_path, scripted_server):
    ledger = CallLedger(prices=PRICES, cache=CacheSettings(tmp_path / "cache", judge=False))
    try:
        for _ in range(2):
            with ledger.group():
                await scoped_client(client, role="judge").chat(body("grade", model="judge-model"), rollout_id="j")
                await scoped_client(client, role="policy").chat(body("answer"), rollout_id="p")
    finally:
        ledger.close()
    assert scripted_server.counts["requests"] == 3, "the judge twice, the policy once"
    totals = {item.role: item for item in ledger.totals()}
    assert (totals["judge"].requests, totals["judge"].cache_hits, totals["judge"].cache_misses) == (2, 0, 0)
    assert (totals["policy"].requests, totals["policy"].cache_hits) == (1, 1)


async def test_a_sampled_request_without_a_seed_is_cached_per_rollout_or_not_at_all(client, tmp_path, scripted_server):
    sampled = {"model": "policy-model", "messages": [{"role": "user", "content": "draw"}], "temperature": 1.0}
    ledger = CallLedger(prices=PRICES, cache=CacheSettings(tmp_path / "per-rollout"))
    try:
        for rollout in ("e#0", "e#1", "e#0", "e#1"):
            with ledger.group():
                await scoped_client(client, role="policy").chat(sampled, rollout_id=rollout)
    finally:
        ledger.close()
    assert scripted_server.counts["requests"] == 2, "each sibling's own draw, replayed"

    skipping = CallLedger(prices=PRICES, cache=CacheSettings(tmp_path / "skip", unseeded="skip"))
    try:
        for rollout in ("e#0", "e#0"):
            with skipping.group():
                await scoped_client(client, role="policy").chat(sampled, rollout_id=rollout)
            with skipping.group():  # seeded: one reply, whatever the rollout
                await scoped_client(client, role="policy").chat({**sampled, "seed": 1}, rollout_id=rollout)
    finally:
        skipping.close()
    assert scripted_server.counts["requests"] == 2 + 2 + 1
    (figures,) = skipping.totals()
    assert (figures.requests, figures.cache_hits, figures.cache_misses) == (3, 1, 1)


async def test_errors_and_cut_off_replies_are_never_kept(client, ledger, scripted_server):
    with ledger.group(), pytest.raises(ModelError):
        await scoped_client(client, role="policy").chat(body(scripted({"status": 400, "message": "bad"})))
    cut_then_whole = body(scripted({"fail": {"truncated": True, "times": 1}, "content": "whole"}))
    with ledger.group():
        first = await scoped_client(client, role="policy").chat(cut_then_whole, rollout_id="r")
    with ledger.group():
        second = await scoped_client(client, role="policy").chat(cut_then_whole, rollout_id="r")
    assert first.message["content"] == second.message["content"] == "whole"
    assert scripted_server.counts["truncated"] == 1
    assert ledger.cache is not None and ledger.cache.entries()[0] == 1, "only the whole reply was stored"


async def test_a_model_without_a_price_has_an_unknown_cost_never_zero(client, tmp_path):
    ledger = CallLedger(prices=PRICES)
    with ledger.group() as meter:
        await scoped_client(client, role="policy").chat(body("hi", model="nobody-priced-me"), rollout_id="r")
    (figures,) = meter.log().of("r")
    assert figures.requests == 1 and figures.usd is None


def test_call_figures_read_back_from_their_dict_with_every_field():
    import dataclasses

    figures = CallFigures("judge", "gpt-4o", 3, 1, 2, 100, 20, 5, None)

    assert figures.to_dict() == dataclasses.asdict(figures)
    assert CallFigures.from_dict(figures.to_dict()) == figures
