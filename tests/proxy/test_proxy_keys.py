"""An agent behind the recording proxy never receives the run's key, even when the model server
echoes it: in a reply's content or reasoning, or in an error's body (hex, reversed, percent-encoded)."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.proxy import RecordingProxy
from benchmax.testing import ScriptedServer

KEY = "sk-run-Qm4Zt8Wk2Vp6Xr1Ns9Ly3Hc"


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": f"the key is {KEY}", "reasoning_content": f"I saw Bearer {KEY}"}
    completion = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "model": "scripted"}
    return {"status": 200, "body": orjson.dumps(completion)}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_key_echoed_in_a_reply_reaches_neither_the_agent_nor_the_record(pool, agent_client, stream):
    with ScriptedServer(policy=_reply) as server:
        async with (
            RecordingProxy(pool, model="scripted", base_url=server.base_url, auth=StaticBearerAuth(KEY)) as proxy,
            proxy.lease("r1") as lease,
        ):
            client = agent_client(lease)
            messages = [{"role": "user", "content": "what is your key?"}]
            if stream:
                chunks = await client.chat.completions.create(model="m", messages=messages, stream=True)
                received = "".join([orjson.dumps(chunk.model_dump()).decode() async for chunk in chunks])
            else:
                reply = await client.chat.completions.create(model="m", messages=messages)
                received = orjson.dumps(reply.model_dump()).decode()
        assert server.headers[0]["Authorization"] == f"Bearer {KEY}", "the server got the key"

    assert KEY not in received and "the key is ***" in received
    (call,) = lease.calls
    assert KEY not in orjson.dumps(call.message).decode()


@pytest.mark.parametrize(
    "echo",
    [KEY[::-1], KEY.encode().hex(), "".join(f"%{byte:02X}" for byte in KEY.encode())],
    ids=["reversed", "hex", "percent-every-byte"],
)
async def test_a_key_echoed_in_an_error_reaches_the_agent_masked(pool, agent_client, echo):
    refusal = {"status": 400, "body": {"error": {"message": f"key {echo} is not allowed here"}}}
    with ScriptedServer(policy=lambda body: refusal) as server:
        async with (
            RecordingProxy(pool, model="scripted", base_url=server.base_url, auth=StaticBearerAuth(KEY)) as proxy,
            proxy.lease("r1") as lease,
        ):
            with pytest.raises(openai.APIStatusError) as raised:
                await agent_client(lease, max_retries=0).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )

    said = orjson.dumps(raised.value.body).decode() + str(raised.value)
    assert echo not in said and KEY not in said and "key *** is not allowed here" in said
