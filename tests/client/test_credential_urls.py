"""A base URL's credential parameters never reach an error: every message that names the server
names it masked, as the run's banner does (``redact_url``)."""

from __future__ import annotations

import pytest

from benchmax.auth import redact_url
from benchmax.client import HttpModelClient, ModelError, RetryPolicy
from benchmax.testing import ScriptedServer, free_port

KEY = "sk-live-0123456789abcdef"
NO_RETRY = RetryPolicy(max_attempts=1)


async def _preflight_error(base_url: str) -> str:
    client = HttpModelClient(base_url, retry=NO_RETRY)
    try:
        with pytest.raises(ModelError) as raised:
            await client.preflight("scripted")
    finally:
        await client.aclose()
    return str(raised.value)


@pytest.mark.parametrize("parameter", ["key", "api_key", "access_token"])
async def test_cannot_reach_names_the_server_with_its_credential_masked(parameter):
    url = f"http://127.0.0.1:{free_port()}/v1?{parameter}={KEY}"

    said = await _preflight_error(url)

    assert said.startswith(f"cannot reach the model server at {redact_url(url)} ")
    assert KEY not in said and f"{parameter}=***" in said


async def test_a_404_and_its_try_base_url_hint_keep_the_credential_masked():
    with ScriptedServer(models=None) as server:
        url = f"http://127.0.0.1:{server.port}?key={KEY}"

        said = await _preflight_error(url)

    assert KEY not in said
    assert "answers a 1-token chat request with HTTP 404" in said
    assert f"try --base-url http://127.0.0.1:{server.port}/v1?key=***" in said


async def test_the_client_and_its_gate_show_the_url_masked():
    client = HttpModelClient(f"http://127.0.0.1:{free_port()}/v1?api_key={KEY}")
    try:
        assert KEY not in repr(client) and KEY not in repr(client.gate) and KEY not in client.gate.shown
    finally:
        await client.aclose()
