"""One record for a pool's request counters, with one merge used by the pool and by the Ray executor."""

from __future__ import annotations

import pytest

from benchmax.client import CallFigures, ClientPool, PoolStats
from benchmax.testing import ScriptedServer


def _body() -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_merge_adds_counters_causes_servers_and_call_figures():
    left = PoolStats(
        requests=3,
        retries={"http_500": 1},
        failures={"endpoint_down": 1},
        resent=1,
        endpoints={"http://a/v1": PoolStats(requests=3, retries={"http_500": 1})},
        calls=(CallFigures("policy", "m", requests=3, usd=0.5),),
    )
    right = PoolStats(
        requests=2,
        retries={"http_500": 2, "http_429": 1},
        rerouted=4,
        endpoints={"http://a/v1": PoolStats(requests=1), "http://b/v1": PoolStats(requests=1)},
        calls=(CallFigures("policy", "m", requests=2, usd=None), CallFigures("judge", "j", requests=1)),
    )
    merged = PoolStats.merge([left, right])
    assert merged.to_json() == {
        "requests": 5,
        "retries": {"http_500": 3, "http_429": 1},
        "failures": {"endpoint_down": 1},
        "resent": 1,
        "rerouted": 4,
        "endpoints": {
            "http://a/v1": {"requests": 4, "retries": {"http_500": 1}, "failures": {}, "resent": 0},
            "http://b/v1": {"requests": 1, "retries": {}, "failures": {}, "resent": 0},
        },
        "calls": [
            CallFigures("judge", "j", requests=1).to_dict(),
            CallFigures("policy", "m", requests=5, usd=None).to_dict(),
        ],
    }
    assert PoolStats.from_json(merged.to_json()) == merged


@pytest.mark.parametrize("calls", [None, ()])
def test_the_json_shape_names_only_what_happened(calls):
    data = PoolStats(calls=calls).to_json()
    expected = {"requests": 0, "retries": {}, "failures": {}, "resent": 0}
    assert data == (expected if calls is None else {**expected, "calls": []})
    assert PoolStats.from_json(data) == PoolStats(calls=calls)


async def test_a_pool_sums_its_clients_and_lists_servers_only_when_there_are_several():
    with ScriptedServer() as first, ScriptedServer() as second:
        pool = ClientPool()
        try:
            for _ in range(3):
                await pool.get(first.base_url).chat(_body())
            assert pool.totals() == PoolStats(requests=3)
            assert pool.stats() == {"requests": 3, "retries": {}, "failures": {}, "resent": 0}
            await pool.get(second.base_url).chat(_body())
            totals = pool.totals()
        finally:
            await pool.aclose()
    assert totals.requests == 4
    assert {url: figures.requests for url, figures in totals.endpoints.items()} == {
        first.base_url: 3,
        second.base_url: 1,
    }
    assert pool.stats() == totals.to_json()
