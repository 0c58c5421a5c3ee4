"""``benchmax serve``: one env, served on a loopback port by default, its env code behind a token always.

Without ``--token`` a token is generated at start: beyond loopback it is printed
once and guards every request; on loopback it is written to a file only the
user can read (:func:`benchmax.remote.wire.token_path`), where a local proxy finds
it, and guards what runs env code (sessions, tools, rewards, ``/ws``), so no web
page and no other user on the machine can run the env's tools. ``--no-token``
drops it on loopback only.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import uvicorn

from benchmax.access import bind, is_loopback, normalize_origin, private_token_file, resolve_token
from benchmax.envs import BaseEnv, check_env_definition, implements, install_log_capture
from benchmax.errors import BenchmaxError
from benchmax.loading import load_env
from benchmax.remote import is_remote_spec, wire
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
    require_token: bool = True,
    allowed_origins: Iterable[str] = (),
    config: ServeConfig | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the env ``spec`` names until SIGTERM or Ctrl-C; every open session is torn down then.

    ``require_token=False`` (``--no-token``) serves loopback clients without a token;
    ``allowed_origins`` are web pages (``scheme://host:port``) allowed to call the server.
    """
    config = config or ServeConfig()
    given = token is not None
    token = resolve_token(host, token)
    if not require_token:
        if given or token is not None:
            raise ServeError(
                f"--no-token serves loopback only and takes no --token; --host {host} needs a token "
                "(drop --no-token to have one generated)"
            )
    elif token is None:
        token = secrets.token_urlsafe(24)
    try:
        origins = [normalize_origin(origin) for origin in allowed_origins]
    except ValueError as exc:
        raise ServeError(f"--allow-origin: {exc}") from None
    token_for_reads = given or not is_loopback(host)
    env, base_dir = load_served(spec, env_kwargs, data_dir=data_dir)
    service = EnvService(env, base_dir, config, spec=spec)
    started = False
    try:
        sock = bind(host, port)
        real_port = sock.getsockname()[1]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        shown = f"[{shown}]" if ":" in shown else shown
        announce(f"benchmax serve: {type(env).__name__} at http://{shown}:{real_port} (data: {base_dir})")
        token_path = wire.token_path(real_port) if token is not None and not given else None
        token_file = None
        if token_path is not None and token is not None:
            try:
                # parents[2]: the shared runtime directory, which another user may be able to write
                token_file = private_token_file(token_path, token, below=token_path.parents[2])
            except BaseException:
                sock.close()
                raise
            announce(f"the token that runs env code is in {token_path} (benchmax eval on this machine reads it)")
        if token is not None and not given and not is_loopback(host):
            announce(f"clients need the token: export {wire.TOKEN_ENV}={token}")
        if not is_loopback(host):
            announce("listening beyond this machine: give the token only to those who may run this env")
        elif token is None:
            announce("no token (--no-token): any program on this machine may run this env's tools")
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        install_log_capture(logging.INFO)
        app = create_app(
            service,
            token=token,
            token_for_reads=token_for_reads,
            allowed_origins=origins,
            on_shutdown=[token_file.remove] if token_file is not None else [],
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app,
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
            if token_file is not None:
                token_file.remove()
    finally:
        if not started:
            asyncio.run(env.aclose())
