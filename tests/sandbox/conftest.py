"""Real sandboxes for the sandbox tests: the local bubblewrap provider, checked once.

CI installs bubblewrap (``.ci/run``), so a machine without it fails these tests
with the install command instead of skipping them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from benchmax.sandbox import BwrapProvider, Sandbox, SandboxSpec, SandboxUnavailable


@pytest.fixture(scope="session")
def bwrap() -> BwrapProvider:
    provider = BwrapProvider()
    try:
        provider.check()
    except SandboxUnavailable as error:
        pytest.fail(f"the local sandbox must run for these tests: {error}", pytrace=False)
    return provider


@pytest.fixture
async def start(bwrap: BwrapProvider) -> AsyncIterator[Callable[..., object]]:
    """``await start(spec=None)``: a running local sandbox, stopped after the test."""
    started: list[Sandbox] = []

    async def make(spec: SandboxSpec | None = None) -> Sandbox:
        sandbox = await bwrap.start(spec)
        started.append(sandbox)
        return sandbox

    yield make
    for sandbox in started:
        await sandbox.stop()


@pytest.fixture
async def sandbox(start) -> Sandbox:
    return await start()
