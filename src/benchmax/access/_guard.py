"""Who may read the inspector or drive ``benchmax serve``, and the headers that keep run content inert.

Without a token only loopback clients that name a loopback host are served: that
stops other machines and DNS-rebinding pages alike. With a token every request
must carry it (``Authorization: Bearer``, or the cookie set when the printed
``?token=`` link is first opened); ``benchmax serve``'s generated loopback token
guards only what runs env code (every method but GET/HEAD/OPTIONS, and
WebSockets), its reads staying under the loopback rule. WebSocket connections
follow the same rule; they may also carry the token as ``?token=``.

A browser names the page behind every cross-origin request (and every
WebSocket handshake and POST) in ``Origin``, and a page cannot forge it. So a
request whose ``Origin`` is neither this server (the ``Host`` it was sent to)
nor an origin allowed by name is refused, token or not: a page elsewhere can
neither read nor drive what is served here. A request without ``Origin`` comes
from a program, not a page, and is judged by the rules above.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "benchmax_inspect_token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that only read: everything else changes state (opens a session, runs a tool)."""
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}
_CREDENTIAL = "benchmax.credential"
"""The ASGI scope key under which the guard records what a request authenticated with."""


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


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` in lower case, as a browser writes ``Origin``; a ``ValueError`` otherwise."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"an origin is scheme://host[:port] (http or https), got {origin!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"an origin is scheme://host[:port] (http or https), got {origin!r}")
    return f"{parts.scheme}://{parts.netloc.lower()}"


class AccessGuard:
    """ASGI middleware: the access rule above, plus security headers on every HTTP response.

    ``token_for_reads=False`` asks the token only of requests that change state
    (and of WebSockets); reads are then served under the loopback rule.
    ``allowed_origins`` are the pages, besides this server's own, that may call it.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None = None,
        token_for_reads: bool = True,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.token = token or None
        self.token_for_reads = token_for_reads
        self.allowed_origins = frozenset(normalize_origin(origin) for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        websocket = scope["type"] == "websocket"
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        refusal = self._foreign_origin(headers)
        if refusal is None:
            refusal = self._unauthorised(scope, headers, query, websocket)
        if refusal is not None:
            if websocket:
                message = await receive()
                if message["type"] == "websocket.connect":
                    await send({"type": "websocket.close", "code": 1008})  # before accept: HTTP 403
                return
            await _deny(send, *refusal)
            return
        if self.token is not None and self._needs_token(scope):
            scope[_CREDENTIAL] = _fingerprint(self.token)
        if websocket:
            await self.app(scope, receive, send)
            return
        if self.token is not None and self._needs_token(scope) and _matches(query.get("token"), self.token):
            await _redirect_with_cookie(scope, send, query, self.token)
            return
        await self.app(scope, receive, _with_security_headers(send))

    def _foreign_origin(self, headers: dict[str, str]) -> tuple[int, str] | None:
        origin = headers.get("origin")
        if origin is None:
            return None
        try:
            normalized = normalize_origin(origin)
        except ValueError:
            normalized = None  # "null": a sandboxed frame, a file:// page, a redirect across origins
        host = headers.get("host", "").lower()
        if normalized is not None and (normalized.split("://", 1)[1] == host or normalized in self.allowed_origins):
            return None
        return (
            403,
            f"cross-origin request refused: Origin {origin[:200]!r} is not this server; "
            "a page elsewhere may not call it (allow one by name with --allow-origin)",
        )

    def _needs_token(self, scope: Scope) -> bool:
        return self.token_for_reads or scope["type"] == "websocket" or scope.get("method", "GET") not in SAFE_METHODS

    def _unauthorised(
        self, scope: Scope, headers: dict[str, str], query: dict[str, str], websocket: bool
    ) -> tuple[int, str] | None:
        if self.token is not None and self._needs_token(scope):
            supplied = [_bearer(headers), _cookie(headers), query.get("token")]
            if any(_matches(value, self.token) for value in supplied):
                return None
            return 401, "a token is required: open the link printed by benchmax inspect, or send Authorization: Bearer"
        client = scope.get("client")
        if not is_loopback(client[0] if client else None):
            return 403, "non-local access is refused: restart with --host and --token"
        if not is_loopback(_hostname(headers.get("host", ""))):
            return 403, "unexpected Host header: open it via 127.0.0.1"
        return None


def credential_of(scope: Scope) -> str:
    """Who a request is, for per-client shares: the token it authenticated with (a fingerprint,
    never the token), whatever address it came from; without a token, loopback as a whole (no
    other client is served then).

    Not the peer address: one host has many (127.0.0.0/8, IPv6 privacy addresses), so an
    address would give one token holder as many shares as addresses it can bind.
    """
    return scope.get(_CREDENTIAL) or "no-token (every local program)"


def _fingerprint(token: str) -> str:
    return "token sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


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
