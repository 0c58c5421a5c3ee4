"""The model endpoint of a run: checked before any rollout is spent, watched while the run goes.

A ``--base-url`` endpoint gets one preflight request, so an unreachable server
or a URL missing its ``/v1`` stops the run at once with what to do. The
embedded model is started here (its server must pass a self-test first) and
supervised: when its process dies mid-run, that is said at once (how it died,
the end of its log), the endpoint's gate holds the rollouts that were waiting,
and the server is restarted on the same port, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.auth import ModelAuth
from benchmax.client import ClientPool, EndpointGate, HttpModelClient, ModelError

logger = logging.getLogger("benchmax.runner")

MAX_RESTARTS = 3
"""Times the embedded model's server is restarted after dying mid-run, before the run stops."""
_WATCH_INTERVAL = 0.2


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    model: str
    embedded: bool = False


class EndpointError(ModelError):
    """The run's model endpoint cannot serve it (unreachable, wrong URL, a server that crashes)."""

    def __init__(self, message: str) -> None:
        super().__init__("model_error", message)


@contextlib.asynccontextmanager
async def model_endpoint(
    base_url: str | None,
    model: str | None,
    clients: ClientPool,
    *,
    log_dir: Path,
    auth: ModelAuth | None = None,
    embedded_options: dict[str, Any] | None = None,
) -> AsyncIterator[Endpoint]:
    """The endpoint to send rollouts to; ``base_url=None`` starts the embedded model.

    Without ``model``, the one model the server lists at ``/models`` is used. A
    base URL the pool routes to a client of its own (a trainer's in-process
    policy, registered with ``ClientPool.register``) needs no preflight.
    """
    if base_url is not None and not isinstance(clients.get(base_url), HttpModelClient):
        yield Endpoint(base_url.rstrip("/"), model or "policy")
        return
    if base_url is not None:
        try:
            served = await clients.http(base_url).preflight(model, auth=auth)
        except ModelError as exc:
            raise EndpointError(str(exc)) from None
        yield Endpoint(base_url.rstrip("/"), model or _only_model(base_url, served))
        return
    from benchmax.local import EmbeddedModel, EmbeddedModelError

    server = EmbeddedModel(log_dir=log_dir, **(embedded_options or {}))
    try:
        await server.astart()
    except EmbeddedModelError as exc:
        raise EndpointError(str(exc)) from None
    supervisor = asyncio.create_task(_supervise(server, clients.gate(server.base_url)), name="benchmax-embedded")
    try:
        yield Endpoint(server.base_url, server.model, embedded=True)
    finally:
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervisor
        await server.astop()


def _only_model(base_url: str, served: list[str]) -> str:
    if len(served) > 1:
        listed = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
        raise EndpointError(f"{base_url} serves {len(served)} models ({listed}); choose one with --model")
    return served[0] if served else "default"


async def _supervise(server: Any, gate: EndpointGate) -> None:
    """Watch the embedded server; after a death hold its requests, restart it, let them go again."""
    from benchmax.local import EmbeddedModelError, describe_exit

    restarts = 0
    while True:
        ended = await server.wait_exit(_WATCH_INTERVAL)
        if ended is None:
            return
        pid, returncode = ended
        how = describe_exit(returncode)
        gate.hold(f"the embedded model server {how}")
        logger.error(
            "the embedded model server (pid %d) %s; last lines of %s:\n%s",
            pid,
            how,
            server.log_path,
            server.log_tail(),
        )
        if restarts >= MAX_RESTARTS:
            gate.fail(
                f"the embedded model server {how} again after {MAX_RESTARTS} restarts; its log is {server.log_path}"
            )
            return
        restarts += 1
        logger.warning("restarting the embedded model server (%d/%d)", restarts, MAX_RESTARTS)
        try:
            await server.arestart()
        except EmbeddedModelError as exc:
            gate.fail(f"the embedded model server could not be restarted: {exc}")
            return
        gate.release()
