"""``benchmax serve``: one env, served on a loopback port by default, behind a token for anything else."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import uvicorn

from benchmax.envs import BaseEnv, check_env_definition, implements, is_remote_spec, load_env, wire
from benchmax.errors import BenchmaxError
from benchmax.inspector import bind, is_loopback, resolve_token
from benchmax.serve import _capture
from benchmax.serve._app import create_app
from benchmax.serve._service import EnvService, ServeConfig

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
"""OpenEnv's servers listen on 8000 too."""


class ServeError(BenchmaxError, ValueError):
    """The env cannot be served as asked (a URL, an env with its own harness)."""


def load_served(
    spec: str, env_kwargs: Mapping[str, Any] | None = None, *, data_dir: str | Path | None = None
) -> tuple[BaseEnv, Path]:
    """The env to serve and its data directory, checked before the port opens.

    Served envs run the standard loop on the client's side, so an env whose
    rollouts run in its own harness (``run_rollout``/``run_group``) cannot be
    served: its loop would need the model endpoint here.
    """
    if is_remote_spec(spec):
        raise ServeError(f"{spec} is served already; benchmax serve takes a local env (a file, directory or package)")
    env, base_dir = load_env(spec, env_kwargs, data_dir=data_dir)
    name = type(env).__name__
    if not isinstance(env, BaseEnv):
        raise ServeError(f"{name} is not a BaseEnv: only envs that use the standard model loop can be served")
    for hook in ("run_rollout", "run_group"):
        if implements(env, hook):
            raise ServeError(
                f"{name} implements its own {hook}: its rollouts run in its own harness, which would need the "
                "model endpoint on the server; run it here instead (benchmax eval ENV)"
            )
    check_env_definition(env)
    return env, base_dir


def serve(
    spec: str,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    data_dir: str | Path | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    config: ServeConfig | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the env ``spec`` names until SIGTERM or Ctrl-C; every open session is torn down then."""
    config = config or ServeConfig()
    token = resolve_token(host, token)
    env, base_dir = load_served(spec, env_kwargs, data_dir=data_dir)
    service = EnvService(env, base_dir, config, spec=spec)
    started = False
    try:
        sock = bind(host, port)
        real_port = sock.getsockname()[1]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        shown = f"[{shown}]" if ":" in shown else shown
        announce(f"benchmax serve: {type(env).__name__} at http://{shown}:{real_port} (data: {base_dir})")
        if token is not None:
            announce(f"clients need the token: export {wire.TOKEN_ENV}={token}")
        if not is_loopback(host):
            announce("listening beyond this machine: give the token only to those who may run this env")
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        _capture.install(logging.INFO)
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(service, token=token),
                log_level="warning",
                access_log=False,
                lifespan="on",
                ws_max_size=config.max_request_bytes,
                timeout_graceful_shutdown=max(1, int(config.shutdown_grace)),
            )
        )
        started = True
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
    finally:
        if not started:
            asyncio.run(env.aclose())
