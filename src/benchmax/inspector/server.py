"""Running the inspector: a loopback web server by default, a token for anything else."""

from __future__ import annotations

import re
import secrets
import socket
import threading
import webbrowser
from pathlib import Path

import uvicorn

from benchmax.errors import BenchmaxError
from benchmax.inspector.app import create_app
from benchmax.inspector.security import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
_TOKEN = re.compile(r"[A-Za-z0-9._~-]{8,}")


class InspectorError(BenchmaxError, ValueError):
    """The inspector cannot start as asked (bad token, port taken, nothing to show)."""


def resolve_token(host: str, token: str | None) -> str | None:
    """The token to require: the given one, or a fresh one when binding beyond loopback."""
    if token is not None and not _TOKEN.fullmatch(token):
        raise InspectorError(
            "--token must be at least 8 characters of letters, digits and . _ ~ - (it travels in a URL and a cookie)"
        )
    if token is None and not is_loopback(host):
        return secrets.token_urlsafe(24)
    return token


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or an error that says which port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InspectorError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another with --port") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(
    path: str | Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_browser: bool = True,
) -> None:
    """Serve the runs under ``path`` until interrupted.

    Binding to anything but loopback always requires a token: one is generated
    when none is given, and printed in the link to open.
    """
    token = resolve_token(host, token)
    app = create_app(path, token=token)
    sock = bind(host, port)
    real_port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{real_port}/" + (f"?token={token}" if token else "")
    print(f"benchmax inspector: {url}", flush=True)
    if not is_loopback(host):
        print("listening beyond this machine: share the link only with people who may read these runs")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    if open_browser:
        threading.Thread(target=_open_when_started, args=(server, url), daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        app.state.catalog.close()
        sock.close()


def _open_when_started(server: uvicorn.Server, url: str) -> None:
    for _ in range(200):
        if server.started:
            webbrowser.open(url)
            return
        threading.Event().wait(0.05)
