"""A listening socket and the token to ask for: what every face that serves HTTP starts with."""

from __future__ import annotations

import re
import secrets
import socket

from benchmax.access._guard import is_loopback
from benchmax.errors import BenchmaxError

_TOKEN = re.compile(r"[A-Za-z0-9._~-]{8,}")


class AccessError(BenchmaxError, ValueError):
    """A server cannot start as asked: a bad token, a taken port, an unsafe token file."""


def resolve_token(host: str, token: str | None, *, required: bool = False) -> str | None:
    """The token to require: the given one, or a fresh one when ``required`` or binding beyond loopback."""
    if token is not None and not _TOKEN.fullmatch(token):
        raise AccessError(
            "--token must be at least 8 characters of letters, digits and . _ ~ - (it travels in a URL and a cookie)"
        )
    if token is None and (required or not is_loopback(host)):
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
        raise AccessError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another with --port") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
