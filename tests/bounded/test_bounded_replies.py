"""Every reply read from a network peer goes through one bounded reader: a gzip bomb is refused
once its decoded bytes pass the bound, before the rest is decoded, whichever path reads it.

Each case is a real HTTP server on loopback sending a few hundred kB that gunzip to tens or
hundreds of MB; memory is measured with ``tracemalloc`` around the read.
"""

from __future__ import annotations

import tracemalloc
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from bomb_server import BombServer, MiB, bomb

from benchmax.bounded import ReplyTooLarge, read_reply_sync
from benchmax.client import HttpModelClient, ModelError, RetryPolicy
from benchmax.envs import RolloutFailure, TerminationReason
from benchmax.loading import EnvSpec
from benchmax.remote import MAX_REPLY_BYTES, wire

CAP = MiB
"""The client's ``max_reply_bytes`` in these tests: the bound is the caller's, whatever it is."""
DECODED = 48 * MiB
NO_RETRY = RetryPolicy(max_attempts=1)
NOT_FOUND = (404, b'{"error": {"message": "no such route"}}', {})


async def _peak(read: Callable[[], Awaitable[Any]]) -> tuple[Any, int]:
    """What ``read()`` returned (or raised), and the most memory allocated while it ran."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = await read()
        except Exception as exc:
            outcome = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome, peak


async def _with_client(server: BombServer, call: Callable[[HttpModelClient], Awaitable[Any]]) -> Any:
    client = HttpModelClient(f"{server.url}/v1", max_reply_bytes=CAP, retry=NO_RETRY)
    try:
        return await call(client)
    finally:
        await client.aclose()


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("answers", "call"),
    [
        pytest.param({"GET /v1/models": bomb(DECODED)}, lambda client: client.preflight("m"), id="preflight-models"),
        pytest.param(
            {"GET /v1/models": NOT_FOUND, "POST /v1/chat/completions": bomb(DECODED)},
            lambda client: client.preflight("m"),
            id="preflight-1-token-chat",
        ),
        pytest.param({"POST /v1/chat/completions": bomb(DECODED)}, lambda client: client.chat(CHAT), id="chat"),
        pytest.param({"GET /v1/models": bomb(DECODED)}, lambda client: client.served_models(), id="served-models"),
    ],
)
async def test_a_model_servers_bomb_is_refused_at_the_clients_bound(answers, call):
    with BombServer(answers) as server:
        outcome, peak = await _peak(lambda: _with_client(server, call))

    assert isinstance(outcome, ModelError), outcome
    assert f"larger than {CAP:,} bytes once decompressed (Content-Encoding: gzip)" in str(outcome)
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB allocated reading a reply bounded at 1 MiB"


async def test_the_gates_outage_probe_reads_a_bomb_no_further_than_it_needs_and_counts_it_an_answer():
    with BombServer({"GET /v1/models": bomb(DECODED)}) as server:
        outcome, peak = await _peak(lambda: _with_client(server, lambda client: client.probe()))

    assert outcome is True, "an answer, however large, says the endpoint is up"
    assert peak < 4 * MiB, f"{peak / MiB:.1f} MiB allocated by a probe"


def _info() -> tuple[int, bytes, dict[str, str]]:
    info = {"protocol": wire.PROTOCOL, "limits": {"max_turns": 2}, "hooks": {}, "env": {"name": "Bombed"}}
    return 200, orjson.dumps(info), {}


async def test_a_served_envs_bomb_is_refused_at_the_remote_clients_bound():
    with BombServer({"GET /info": _info(), "GET /tools": bomb(MAX_REPLY_BYTES + 64 * MiB)}) as server:
        env = EnvSpec(server.url).load()
        try:
            outcome, peak = await _peak(env.list_tools)
        finally:
            await env.aclose()

    assert isinstance(outcome, RolloutFailure), outcome
    assert outcome.reason == TerminationReason.HARNESS_ERROR
    assert f"of the env server at {server.url} to list_tools is larger than {MAX_REPLY_BYTES:,} bytes" in str(outcome)
    assert peak < MAX_REPLY_BYTES + 32 * MiB, f"{peak / MiB:.1f} MiB allocated"


@pytest.mark.parametrize(("size", "refused"), [(CAP, False), (CAP + 1, True)])
def test_a_blocking_reply_is_read_up_to_the_bound_and_refused_one_byte_past_it(size, refused):
    with (
        BombServer({"GET /big": (200, b"x" * size, {})}) as server,
        urllib.request.urlopen(f"{server.url}/big", timeout=30) as response,
    ):
        if refused:
            with pytest.raises(ReplyTooLarge, match=f"larger than {CAP:,} bytes once decompressed"):
                read_reply_sync(response, limit=CAP, what="from the test server")
        else:
            assert read_reply_sync(response, limit=CAP, what="from the test server") == b"x" * size
