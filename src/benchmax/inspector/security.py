"""Who may read the inspector, and the headers that keep run content inert in a browser.

Without a token only loopback clients that name a loopback host are served: that
stops other machines and DNS-rebinding pages alike. With a token every request
must carry it (``Authorization: Bearer``, or the cookie set when the printed
``?token=`` link is first opened). WebSocket connections (``benchmax serve``'s
``/ws``) follow the same rule; they may also carry the token as ``?token=``.
"""

from __future__ import annotations

import hmac
import ipaddress
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "benchmax_inspect_token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or a name) can only mean this machine."""
    if not host:
        return False
    host = host.strip("[]")
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AccessGuard:
    """ASGI middleware: the access rule above, plus security headers on every response."""

    def __init__(self, app: ASGIApp, *, token: str | None = None) -> None:
        self.app = app
        self.token = token or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if self.token is None:
            client = scope.get("client")
            if not is_loopback(client[0] if client else None):
                await _deny(send, 403, "non-local access is refused: restart with --host and --token")
                return
            if not is_loopback(_hostname(headers.get("host", ""))):
                await _deny(send, 403, "unexpected Host header: open the inspector via 127.0.0.1")
                return
        else:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if _matches(query.get("token"), self.token):
                await _redirect_with_cookie(scope, send, query, self.token)
                return
            if not (_matches(_bearer(headers), self.token) or _matches(_cookie(headers), self.token)):
                await _deny(send, 401, "a token is required: open the link printed by benchmax inspect")
                return
        await self.app(scope, receive, _with_security_headers(send))


    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if self.token is None:
            client = scope.get("client")
            allowed = is_loopback(client[0] if client else None) and is_loopback(_hostname(headers.get("host", "")))
        else:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            allowed = any(
                _matches(supplied, self.token) for supplied in (_bearer(headers), _cookie(headers), query.get("token"))
            )
        if allowed:
            await self.app(scope, receive, send)
            return
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": 1008})  # before accept: HTTP 403


def _with_security_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            headers.setdefault("X-Content-Type-Options", "nosniff")
            headers.setdefault("X-Frame-Options", "DENY")
            headers.setdefault("Referrer-Policy", "no-referrer")
            headers.setdefault("Cache-Control", "no-store")
        await send(message)

    return wrapped


def _matches(supplied: str | None, token: str) -> bool:
    return supplied is not None and hmac.compare_digest(supplied.encode(), token.encode())


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return value[7:].strip() if value.lower().startswith("bearer ") else None


def _cookie(headers: dict[str, str]) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:
        return None
    morsel = cookie.get(COOKIE)
    return morsel.value if morsel else None


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _deny(send: Send, status: int, reason: str) -> None:
    body = reason.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(scope: Scope, send: Send, query: dict[str, str], token: str) -> None:
    """Trade the one-off ``?token=`` link for an HttpOnly cookie, and drop it from the URL."""
    rest = urlencode({key: value for key, value in query.items() if key != "token"})
    path = (scope.get("raw_path") or scope.get("path", "/").encode()).decode("latin-1")
    if not path.startswith("/") or path.startswith("//"):
        path = "/"
    location = path + (f"?{rest}" if rest else "")
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"set-cookie", cookie.encode("latin-1")),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
