"""A recording proxy in front of the scripted server, and the official OpenAI SDK as the agent's client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest

from benchmax.client import ClientPool, RetryPolicy
from benchmax.proxy import ProxyLease, RecordingProxy
from benchmax.testing import ScriptedServer

FAST_RETRY = RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.05)


@pytest.fixture
async def pool() -> AsyncIterator[ClientPool]:
    clients = ClientPool(retry=FAST_RETRY, max_outage=1.0)
    yield clients
    await clients.aclose()


@pytest.fixture
async def proxy(pool: ClientPool, scripted_server: ScriptedServer) -> AsyncIterator[RecordingProxy]:
    async with RecordingProxy(pool, model="scripted", base_url=scripted_server.base_url) as running:
        yield running


@pytest.fixture
async def agent_client() -> AsyncIterator[Callable[[ProxyLease], openai.AsyncOpenAI]]:
    """``agent_client(lease)``: an ``AsyncOpenAI`` holding the lease's URL and key, as an agent would."""
    made: list[openai.AsyncOpenAI] = []

    def make(lease: ProxyLease, **kwargs: Any) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(
            base_url=lease.base_url,
            api_key=lease.api_key,
            http_client=httpx.AsyncClient(trust_env=False),
            **kwargs,
        )
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
