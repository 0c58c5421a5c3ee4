"""A hostile model server's reply is bounded: its numbers before anything keeps them, its size once decoded."""

from __future__ import annotations

import tracemalloc
import zlib
from typing import Any

import orjson
import pytest

from benchmax.client import HttpModelClient, ModelError, RetryPolicy
from benchmax.testing import ScriptedServer

MiB = 1024 * 1024
DEFAULT_CAP = 64 * MiB
"""``HttpModelClient``'s ``max_reply_bytes`` unless told."""
NO_WAIT = RetryPolicy(max_attempts=2, backoff_initial=0.001, backoff_max=0.001)


def _gzip_zeros(size: int) -> bytes:
    """``size`` zero bytes gzipped, built a MiB at a time (about a thousandth of ``size``)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    parts = [packer.compress(block) for _ in range(size // MiB)]
    return b"".join([*parts, packer.flush()])


def _reply(body: bytes, **headers: str) -> dict[str, Any]:
    return {"status": 200, "body": body, "headers": headers}


def _server(steps: list[dict[str, Any]]) -> ScriptedServer:
    """A server answering with ``steps`` in turn (the last one again when they run out)."""

    def policy(body: dict[str, Any]) -> dict[str, Any]:
        return steps.pop(0) if len(steps) > 1 else steps[0]

    return ScriptedServer(policy=policy)


async def _chat(server: ScriptedServer, **options: Any) -> Any:
    client = HttpModelClient(server.base_url, retry=NO_WAIT, **options)
    try:
        return await client.chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    finally:
        await client.aclose()


def _completion(usage: dict[str, Any] | None = None, **choice: Any) -> bytes:
    data: dict[str, Any] = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop", **choice}]
    }
    if usage is not None:
        data["usage"] = usage
    return orjson.dumps(data)


# -- size -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decoded", "cap"),
    [
        pytest.param(96 * MiB, None, id="96MiB-bomb-default-cap"),
        pytest.param(16 * MiB, MiB, id="16MiB-bomb-1MiB-cap"),
    ],
)
async def test_a_gzip_bomb_is_read_no_further_than_the_cap(decoded: int, cap: int | None) -> None:
    bomb = _gzip_zeros(decoded)
    assert len(bomb) < decoded // 500
    limit = cap or DEFAULT_CAP
    options = {"max_reply_bytes": cap} if cap else {}
    with _server([_reply(bomb, **{"Content-Encoding": "gzip"})]) as server:
        tracemalloc.start()
        try:
            with pytest.raises(ModelError, match=f"larger than {limit:,} bytes once decompressed") as info:
                await _chat(server, **options)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert server.counts["requests"] == 1, "an oversized reply is not asked for again"
    assert info.value.reason == "model_error"
    assert "Content-Encoding: gzip" in str(info.value)
    # The read stops within a chunk of the cap: the decoded body is never held whole.
    assert peak < limit + 8 * MiB, f"peak {peak / MiB:.1f} MiB traced for a {limit / MiB:.0f} MiB cap"


async def test_a_compressed_reply_within_the_cap_is_read_whole() -> None:
    content = "x" * (2 * MiB)
    body = orjson.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    )
    with _server([_reply(_gzip(body), **{"Content-Encoding": "gzip"})]) as server:
        result = await _chat(server, max_reply_bytes=4 * MiB)
    assert result.message["content"] == content


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


async def test_an_uncompressed_reply_past_the_cap_fails_too() -> None:
    with (
        _server([_reply(_completion() + b" " * (2 * MiB))]) as server,
        pytest.raises(ModelError, match="larger than 1,048,576 bytes"),
    ):
        await _chat(server, max_reply_bytes=MiB)


# -- numbers --------------------------------------------------------------------------------

HUGE = 18446744073709551615


@pytest.mark.parametrize(
    ("reply", "field"),
    [
        pytest.param(_completion({"prompt_tokens": HUGE, "completion_tokens": 1}), "usage.prompt_tokens", id="u64"),
        pytest.param(_completion({"prompt_tokens": 1, "completion_tokens": -5}), "usage.completion_tokens", id="neg"),
        pytest.param(_completion({"prompt_tokens": 3e18}), "usage.prompt_tokens", id="float"),
        pytest.param(_completion({"prompt_tokens": 1.5}), "usage.prompt_tokens", id="fraction"),
        pytest.param(
            _completion({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 2**40}}),
            "usage.prompt_tokens_details.cached_tokens",
            id="cached",
        ),
        pytest.param(_completion(token_ids=[1, 2, HUGE]), r"choices\[0\].token_ids\[2\]", id="token-id"),
        pytest.param(_completion(token_ids=[1, -1]), r"choices\[0\].token_ids\[1\]", id="negative-token-id"),
        pytest.param(
            _completion().replace(b'"choices"', b'"prompt_token_ids": [7, 9223372036854775807], "choices"'),
            r"prompt_token_ids\[1\]",
            id="prompt-token-id",
        ),
    ],
)
async def test_a_number_out_of_range_makes_the_reply_malformed_naming_the_field(reply: bytes, field: str) -> None:
    with _server([_reply(reply)]) as server:
        with pytest.raises(ModelError, match=f"malformed completion: {field} is ") as info:
            await _chat(server)
        assert server.counts["requests"] == NO_WAIT.max_attempts, "retried like any malformed reply"
    assert info.value.reason == "model_error"


async def test_numbers_in_range_are_kept_and_a_count_left_out_is_zero() -> None:
    reply = _completion(
        {"prompt_tokens": 2**31 - 1, "completion_tokens": 7.0, "prompt_tokens_details": {"cached_tokens": None}},
        token_ids=[0, 2**31 - 1],
        logprobs={"content": [{"token": "a", "logprob": -9999}, {"token": "b", "logprob": -0.25}]},
    )
    with _server([_reply(reply)]) as server:
        result = await _chat(server)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cached_tokens) == (
        2**31 - 1,
        7,
        0,
    )
    assert result.completion_token_ids == (0, 2**31 - 1)
    assert result.completion_logprobs == (-9999.0, -0.25)
