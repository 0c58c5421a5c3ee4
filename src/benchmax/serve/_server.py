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
import contextlib
import logging
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import uvicorn

from benchmax.envs import BaseEnv, check_env_definition, implements, install_log_capture
from benchmax.errors import BenchmaxError
from benchmax.inspector import bind, is_loopback, normalize_origin, resolve_token
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
        token_file = wire.token_path(real_port) if token is not None and not given else None
        if token_file is not None:
            announce(f"the token that runs env code is in {token_file} (benchmax eval on this machine reads it)")
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
            on_shutdown=[lambda: _remove_token_file(token_file, token)],
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
            with _private_token_file(token_file, token):
                server.run(sockets=[sock])
        finally:
            sock.close()
    finally:
        if not started:
            asyncio.run(env.aclose())


def _write_private(path: Path, token: str) -> None:
    """``token`` in a file only this user can read, in a directory only this user can list."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.replace(staged, path)


@contextlib.contextmanager
def _private_token_file(path: Path | None, token: str | None) -> Iterator[None]:
    """The token file while the server runs; it goes when the server stops, unless a newer server
    on the port replaced it."""
    if path is not None and token is not None:
        _write_private(path, token)
    try:
        yield
    finally:
        _remove_token_file(path, token)


def _remove_token_file(path: Path | None, token: str | None) -> None:
    if path is not None and token is not None:
        with contextlib.suppress(OSError):
            if path.read_text().strip() == token:
                path.unlink()
