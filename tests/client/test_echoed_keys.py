"""A key the model server echoes is masked wherever the reply goes: a successful reply's content,
reasoning and tool call arguments, and an error's body, in every spelling a server or a model may
echo it (itself, reversed, hex, percent-encoded byte by byte, base64, a piece of any of these)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.client import HttpModelClient, ModelError, RetryPolicy
from benchmax.testing import ScriptedServer

KEY = "sk-proj-7Hq2Lw9Xv4Rt8Yp1Zm6Nc3Bd"
NO_RETRY = RetryPolicy(max_attempts=1)
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

ECHOES = {
    "as-is": KEY,
    "reversed": KEY[::-1],
    "hex": KEY.encode().hex(),
    "HEX": KEY.encode().hex().upper(),
    "percent-every-byte": "".join(f"%{byte:02X}" for byte in KEY.encode()),
    "percent-every-byte-lower": "".join(f"%{byte:02x}" for byte in KEY.encode()),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "cut-at-a-limit": KEY[:14],
}


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "model": "m"}
    return {"status": 200, "body": orjson.dumps(body)}


def _successes(echo: str) -> dict[str, dict[str, Any]]:
    arguments = orjson.dumps({"k": echo}).decode()
    call = {"id": "c1", "type": "function", "function": {"name": "send", "arguments": arguments}}
    return {
        "content": {"role": "assistant", "content": f"your key is {echo}, keep it safe"},
        "reasoning": {"role": "assistant", "content": "done", "reasoning_content": f"the header held {echo}"},
        "tool-arguments": {"role": "assistant", "content": None, "tool_calls": [call]},
    }


async def _chat(server: ScriptedServer) -> Any:
    client = HttpModelClient(server.base_url, StaticBearerAuth(KEY), retry=NO_RETRY)
    try:
        return await client.chat(CHAT)
    finally:
        await client.aclose()


@pytest.mark.parametrize("field", ["content", "reasoning", "tool-arguments"])
@pytest.mark.parametrize("form", list(ECHOES))
async def test_a_key_echoed_in_a_successful_reply_is_masked(form, field):
    echo = ECHOES[form]
    with ScriptedServer(policy=lambda body: _reply(_successes(echo)[field])) as server:
        result = await _chat(server)

    text = orjson.dumps(result.message).decode()
    assert echo not in text and KEY not in text
    assert "***" in text


@pytest.mark.parametrize("form", list(ECHOES))
async def test_a_key_echoed_in_an_error_body_is_masked(form):
    echo = ECHOES[form]
    error = {"status": 400, "body": {"error": {"message": f"invalid key {echo} for this project"}}}
    with ScriptedServer(policy=lambda body: error) as server, pytest.raises(ModelError) as raised:
        await _chat(server)

    said = str(raised.value)
    assert echo not in said and KEY not in said
    assert said.startswith("HTTP 400: invalid key ***") and said.endswith(" for this project")


async def test_a_reply_without_the_key_is_left_as_it_came():
    message = {"role": "assistant", "content": "sk-proj is a prefix; 7Hq2 alone is no key", "reasoning_content": "x"}
    with ScriptedServer(policy=lambda body: _reply(message)) as server:
        result = await _chat(server)

    assert result.message == message
