"""Running the inspector: a loopback web server, behind a token unless the user opts out on loopback.

A run's prompts and completions are as private as the data they came from, and any
user of this machine can connect to a loopback port. So, as ``benchmax serve`` does,
a token is generated at start and every request must carry it; the printed link
carries it (``?token=``, traded for an HttpOnly cookie on first open, as Jupyter
does), and the browser tab opened is that link. ``--no-token`` serves loopback
clients without one, on a machine nobody else uses.
"""

from __future__ import annotations

import threading
import webbrowser
from pathlib import Path

import uvicorn

from benchmax.access import AccessError, bind, is_loopback, resolve_token
from benchmax.inspector.app import create_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765

InspectorError = AccessError
"""The inspector cannot start as asked (a bad token, a taken port): the access layer's error."""


def serve(
    path: str | Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_browser: bool = True,
    require_token: bool = True,
) -> None:
    """Serve the runs under ``path`` until interrupted.

    A token is required unless ``require_token=False`` (``--no-token``), which
    only loopback allows: one is generated when none is given, and printed in
    the link to open.
    """
    if not require_token and (token is not None or not is_loopback(host)):
        raise InspectorError(
            f"--no-token serves loopback only and takes no --token; --host {host} needs a token "
            "(drop --no-token to have one generated)"
        )
    token = resolve_token(host, token, required=require_token)
    app = create_app(path, token=token)
    sock = bind(host, port)
    real_port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{real_port}/" + (f"?token={token}" if token else "")
    print(f"benchmax inspector: {url}", flush=True)
    if not is_loopback(host):
        print("listening beyond this machine: share the link only with people who may read these runs")
    elif token is None:
        print("no token (--no-token): any user of this machine may read these runs")
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
