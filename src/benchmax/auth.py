"""Model authentication, resolved immediately before each model request.

A ``ModelAuth`` is any object with ``async headers_for_request(context)``: the
headers it returns go on that one request. Resolving at request time (rather
than baking a key into a client) lets a runtime rotate short-lived tokens and
lets an env declare *which* credential it needs (``InjectedAuth("judge")``)
without ever holding it, so an env bundle can be shipped without secrets.

The OpenAI SDK adapters (``RequestModelAuth``, ``create_openai_client``,
``create_async_openai_client``) need ``pip install 'benchmax[openai]'``; they are
loaded on first use so that ``import benchmax.auth`` stays free of the SDK.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import quote, unquote

from benchmax.aio import block_on
from benchmax.errors import BenchmaxError

if TYPE_CHECKING:
    import httpx
    from openai import AsyncOpenAI, OpenAI

__all__ = [
    "AUTH_FLAG_FORM",
    "MASK",
    "BasicAuth",
    "EnvironmentKeyAuth",
    "InjectedAuth",
    "ModelAuth",
    "ModelAuthError",
    "ModelRequestContext",
    "RequestModelAuth",
    "StaticBearerAuth",
    "bind_model_auth",
    "bound_model_auth",
    "create_async_openai_client",
    "create_openai_client",
    "mask_secrets",
    "parse_auth_binding",
    "portable_model_auth",
    "redact_url",
    "redact_urls",
    "request_secrets",
    "split_credentials",
]


@dataclass(frozen=True, slots=True)
class ModelRequestContext:
    """Which request is about to be authorised, so a provider can scope its token."""

    base_url: str
    model: str
    rollout_id: str


@runtime_checkable
class ModelAuth(Protocol):
    """Supplies the headers of one model request, just before it is sent."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True, init=False)
class StaticBearerAuth:
    """A fixed API key sent as ``Authorization: Bearer``; never shown in reprs.

    ``StaticBearerAuth("sk-...")`` (benchmax 0.2's spelling) and
    ``StaticBearerAuth(api_key="sk-...")`` make the same object.
    """

    token: str = field(repr=False)

    def __init__(self, token: str | None = None, *, api_key: str | None = None) -> None:
        if token is not None and api_key is not None:
            raise TypeError("give the key once: StaticBearerAuth(token) or StaticBearerAuth(api_key=...)")
        value = token if token is not None else api_key
        if not isinstance(value, str) or not value:
            raise ValueError(
                "bearer token must be a non-empty string; pass no auth at all for a server without keys"
            )
        object.__setattr__(self, "token", value)

    @property
    def api_key(self) -> str:
        return self.token

    @classmethod
    def from_env(cls, variable: str) -> StaticBearerAuth:
        """Read the key from an environment variable, naming it when it is unset or empty."""
        value = os.environ.get(variable)
        if not value:
            raise ValueError(f"environment variable {variable} is not set (or empty); export the API key there")
        return cls(value)

    def headers(self) -> dict[str, str]:
        """The request headers, for clients that bind one key for their lifetime."""
        return {"Authorization": f"Bearer {self.token}"}

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        del context
        return self.headers()


AUTH_FLAG_FORM = "NAME=URL or NAME=URL@VAR"
"""How ``--auth`` is written (eval, validate, rescore, train)."""
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelAuthError(BenchmaxError, ValueError):
    """A credential cannot be used: its variable is unset, or it was asked for another server."""


@dataclass(frozen=True, slots=True)
class EnvironmentKeyAuth:
    """A bearer key read from the environment variable ``variable`` at each request, sent only to ``base_url``.

    What ``--auth judge=https://judge.example/v1`` binds to ``InjectedAuth("judge")``.
    It holds the variable's name, never the key: it can be stored in a run's
    config and sent to worker processes, each of which reads its own
    environment. A request to any other server is refused (the env chose where
    to send it; the key goes only where the user said).
    """

    variable: str
    base_url: str

    def key(self) -> str:
        value = os.environ.get(self.variable)
        if not value:
            raise ModelAuthError(f"environment variable {self.variable} is not set (or empty); export the key there")
        return value

    def covers(self, url: str) -> bool:
        """Whether ``url`` is ``base_url`` or under it (a trailing ``/`` aside)."""
        mine, theirs = self.base_url.rstrip("/"), url.rstrip("/")
        return theirs == mine or theirs.startswith(mine + "/")

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        if not self.covers(context.base_url):
            raise ModelAuthError(
                f"the key in {self.variable} is bound to {self.base_url} (--auth), "
                f"but was asked for a request to {context.base_url}; bind the URL the env calls"
            )
        return {"Authorization": f"Bearer {self.key()}"}


def parse_auth_binding(text: str) -> tuple[str, EnvironmentKeyAuth]:
    """``NAME=URL`` (key in ``BENCHMAX_AUTH_<NAME>_KEY``) or ``NAME=URL@VAR`` (key in ``VAR``).

    ``NAME`` is what the env asks for (``InjectedAuth("judge")``); the key is read
    from the variable, which must be set now (checked here, so a run does not
    start without it), and is sent only to ``URL`` and the paths under it.
    """
    name, sep, target = text.partition("=")
    name = name.strip()
    if not sep or not name or not target:
        raise ModelAuthError(f"{text!r}: write --auth {AUTH_FLAG_FORM}, e.g. --auth judge=https://judge.example/v1")
    url, at, variable = target.rpartition("@")
    if not at or not _VARIABLE.match(variable):
        url, variable = target, "BENCHMAX_AUTH_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper() + "_KEY"
    if not re.match(r"^https?://[^/\s]+", url):
        raise ModelAuthError(f"{text!r}: {url!r} is not an http(s):// URL; write --auth {AUTH_FLAG_FORM}")
    auth = EnvironmentKeyAuth(variable, url)
    auth.key()
    return name, auth


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """HTTP basic credentials, as ``https://USER:PASSWORD@host/v1`` carries them (and curl sends them).

    :func:`split_credentials` takes them out of a URL, so the URL can be shown
    and stored while the credentials go only into the ``Authorization`` header.
    Neither part is shown in reprs.
    """

    username: str = field(repr=False)
    password: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        del context
        return self.headers()


_BOUND: ContextVar[Mapping[str, ModelAuth] | None] = ContextVar("benchmax_bound_model_auth", default=None)


@dataclass(frozen=True, slots=True)
class InjectedAuth:
    """A named credential that the runtime supplies with :func:`bind_model_auth`.

    The env holds only the name (safe to pickle and ship); the provider bound
    under that name in the current async context answers each request.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("injected auth name must be a non-empty string, e.g. InjectedAuth('judge')")

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        bound = _BOUND.get()
        provider = bound.get(self.name) if bound is not None else None
        if provider is None:
            raise RuntimeError(
                f"No runtime model-auth provider was injected for {self.name!r}; "
                f"wrap the run in bind_model_auth({{{self.name!r}: StaticBearerAuth(...)}})"
            )
        if isinstance(provider, InjectedAuth):
            raise RuntimeError(
                f"Injected model-auth provider {self.name!r} cannot reference another InjectedAuth "
                f"({provider.name!r}); bind a concrete provider"
            )
        return await provider.headers_for_request(context)


@contextmanager
def bind_model_auth(providers: Mapping[str, ModelAuth]) -> Iterator[None]:
    """Make ``providers`` answer :class:`InjectedAuth` lookups inside this context.

    The binding is a context variable: tasks started inside inherit it, and it
    ends with the ``with`` block even if the block raises.
    """
    bound = dict(providers)
    for name, provider in bound.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("model-auth provider names must be non-empty strings")
        if not isinstance(provider, ModelAuth):
            raise TypeError(
                f"model-auth provider {name!r} does not implement ModelAuth "
                f"(an async headers_for_request(context) method); got {type(provider).__name__}"
            )
    token = _BOUND.set(bound)
    try:
        yield
    finally:
        _BOUND.reset(token)


def bound_model_auth() -> dict[str, ModelAuth]:
    """The providers :func:`bind_model_auth` bound in this context (none: an empty dict).

    What an executor that runs env code in other processes must carry there: the
    binding is a context variable, which no process boundary crosses by itself.
    """
    return dict(_BOUND.get() or {})


def portable_model_auth(providers: Mapping[str, ModelAuth], *, where: str) -> dict[str, ModelAuth]:
    """``providers``, checked to be safe to send to worker processes ``where`` (e.g. "Ray actors").

    Providers are pickled and sent as they are, so one that holds its key itself
    (:class:`StaticBearerAuth`, :class:`BasicAuth`) would put the key on the wire
    and in the scheduler's records; it is refused, naming the way that sends no
    key: :class:`EnvironmentKeyAuth`, which each worker answers from its own environment.
    """
    for name, provider in providers.items():
        if isinstance(provider, StaticBearerAuth | BasicAuth):
            raise ModelAuthError(
                f"InjectedAuth({name!r}) is bound to a {type(provider).__name__}, which holds its key: "
                f"sending it to {where} would send the key with it. Bind "
                f"EnvironmentKeyAuth('VARIABLE', 'URL') instead (--auth {name}=URL@VARIABLE), with the key "
                "in VARIABLE on every worker"
            )
    return dict(providers)


def _resolve_headers_sync(auth: ModelAuth, context: ModelRequestContext) -> Mapping[str, str]:
    """Run ``auth.headers_for_request`` from synchronous code (a sync SDK client, maybe called
    from an async tool): :func:`benchmax.aio.block_on` keeps :func:`bind_model_auth` bindings
    visible. Providers used this way must not rely on objects tied to the caller's loop."""
    return block_on(_resolve(auth, context), name="benchmax-model-auth")


async def _resolve(auth: ModelAuth, context: ModelRequestContext) -> Mapping[str, str]:
    return await auth.headers_for_request(context)


def _request_auth_class() -> type[httpx.Auth]:
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(
            "RequestModelAuth needs httpx; install it with pip install 'benchmax[openai]'"
        ) from exc

    class RequestModelAuth(httpx.Auth):
        """An ``httpx.Auth`` that asks a :class:`ModelAuth` for headers before each request.

        Sync and async httpx clients (and so both OpenAI SDK clients) can use it;
        credentials never come from an SDK environment variable.
        """

        def __init__(self, auth: ModelAuth, context: ModelRequestContext) -> None:
            if not isinstance(auth, ModelAuth):
                raise TypeError("request auth must implement ModelAuth")
            self._auth = auth
            self._context = context

        def sync_auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
            request.headers.update(_resolve_headers_sync(self._auth, self._context))
            yield request

        async def async_auth_flow(self, request: httpx.Request):  # type: ignore[override]
            request.headers.update(await self._auth.headers_for_request(self._context))
            yield request

    RequestModelAuth.__module__ = __name__
    return RequestModelAuth


MASK = "***"
"""What stands where a secret was."""
_FRAGMENT = 12
"""Characters of a secret that make an echo of it: a piece this long of a cut or split echo is masked too."""
_SHORTEST_SECRET = 4
"""Shorter values are not masked (a one-letter "secret" would mask every such letter of a message)."""
_SECRET_PARAMETER = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|signature|^sig$|session|cookie|bearer", re.IGNORECASE
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")

_T = TypeVar("_T")


def _url_parts(url: str) -> tuple[str, str, str, str] | None:
    """``(scheme://, userinfo, host[:port], rest)`` of ``url``; ``None`` when it has no ``://``.

    Split by hand rather than with ``urlsplit``, which raises on some malformed
    hosts: a URL must lose its credentials even when it is broken.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return None
    end = min((index for index in (rest.find(mark) for mark in "/?#") if index >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    return scheme + separator, userinfo if at else "", host, rest[end:]


def _redact_parameters(text: str) -> str:
    pairs = text.split("&")
    return "&".join(
        f"{pair.partition('=')[0]}={MASK}" if _SECRET_PARAMETER.search(unquote(pair.partition("=")[0])) else pair
        for pair in pairs
    )


def redact_url(url: str) -> str:
    """``url`` fit to print or store: no user info, and the values of credential-like parameters masked.

    Every URL benchmax shows (banners, errors, the inspector) or stores (run
    metadata, provenance) passes through here, so a ``user:password@`` or a
    ``?api_key=`` given on a command line never reaches a terminal log or a run
    directory. Parameters that are not credential-like (``?api-version=``) stay.
    """
    parts = _url_parts(url)
    if parts is None:
        return url
    scheme, _, host, rest = parts
    rest, hash_mark, fragment = rest.partition("#")
    path, question_mark, query = rest.partition("?")
    if query:
        query = _redact_parameters(query)
    if "=" in fragment:  # an OAuth-style #access_token=...
        fragment = _redact_parameters(fragment)
    return f"{scheme}{host}{path}{question_mark}{query}{hash_mark}{fragment}"


def redact_urls(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text) if "://" in text else text


def split_credentials(url: str) -> tuple[str, BasicAuth | None]:
    """``url`` without its user info, and the basic credentials that user info held (percent-decoded).

    ``https://USER:PASSWORD@host/v1`` means what it means to curl: send
    ``Authorization: Basic``. Taking the credentials out here keeps them out of
    every place the URL goes (clients, logs, errors, the run store).
    """
    parts = _url_parts(url)
    if parts is None or not parts[1]:
        return url, None
    scheme, userinfo, host, rest = parts
    username, _, password = userinfo.partition(":")
    return f"{scheme}{host}{rest}", BasicAuth(unquote(username), unquote(password))


def request_secrets(headers: Mapping[str, str]) -> list[str]:
    """The secrets a request's headers carry: every value but the content type, credentials unwrapped."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() == "content-type":
            continue
        scheme, _, credential = value.partition(" ")
        credential = credential.strip()
        if scheme.lower() not in ("bearer", "basic") or not credential:
            found.append(value)
            continue
        found.append(credential)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credential, validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                continue
            found.extend((decoded, decoded.partition(":")[2]))
    return [secret for secret in found if len(secret) >= _SHORTEST_SECRET]


def mask_secrets(value: _T, secrets: Iterable[str]) -> _T:
    """``value`` with every echo of ``secrets`` replaced by ``***``, in text and in decoded JSON at any depth.

    Mask decoded text, never raw bytes: a JSON body may spell a key with
    escapes (``\\u0073k-...``) that only decoding turns back into the key.
    An echo is the secret itself, its percent-encoded or base64 spelling (a
    proxy echoing the ``Authorization`` header), or a piece of one at least
    12 characters long (an echo cut at a length limit, or split across fields).
    Mappings, lists and tuples are masked item by item, keys included.
    """
    exact, pieces = _echo_forms(secrets)
    if not exact and not pieces:
        return value
    return _mask_value(value, exact, pieces, 0)


def _echo_forms(secrets: Iterable[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """Short spellings to find whole, and the 12-character pieces of the longer ones."""
    exact: set[str] = set()
    pieces: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or len(secret) < _SHORTEST_SECRET:
            continue
        spellings = {secret, quote(secret, safe="")}
        exact.update(form for form in spellings if len(form) <= _FRAGMENT)
        data = secret.encode()
        for offset in range(3):  # the secret at each alignment within a longer base64 text
            encoded = base64.b64encode(bytes(offset) + data).decode()
            length = offset + len(data)
            # the characters no neighbouring byte changes: past the alignment, before the last partial group
            core = encoded[(0, 2, 3)[offset] : 4 * (length // 3) + length % 3]
            spellings.update((core, core.replace("+", "-").replace("/", "_")))
        for form in spellings:
            pieces.update(form[index : index + _FRAGMENT] for index in range(len(form) - _FRAGMENT + 1))
    return tuple(sorted(exact, key=len, reverse=True)), frozenset(pieces)


def _mask_value(value: Any, exact: tuple[str, ...], pieces: frozenset[str], depth: int) -> Any:
    if isinstance(value, str):
        return _mask_text(value, exact, pieces)
    if depth >= 64:
        return value
    if isinstance(value, Mapping):
        return {
            _mask_value(key, exact, pieces, depth + 1): _mask_value(item, exact, pieces, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        masked = [_mask_value(item, exact, pieces, depth + 1) for item in value]
        return masked if isinstance(value, list) else tuple(masked)
    return value


def _mask_text(text: str, exact: tuple[str, ...], pieces: frozenset[str]) -> str:
    covered = bytearray(len(text))
    hit = False
    if pieces:
        for index in range(len(text) - _FRAGMENT + 1):
            if text[index : index + _FRAGMENT] in pieces:
                covered[index : index + _FRAGMENT] = b"\x01" * _FRAGMENT
                hit = True
    for form in exact:
        start = text.find(form)
        while start >= 0:
            covered[start : start + len(form)] = b"\x01" * len(form)
            hit = True
            start = text.find(form, start + 1)
    if not hit:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        if covered[index]:
            while index < len(text) and covered[index]:
                index += 1
            out.append(MASK)
        else:
            start = index
            while index < len(text) and not covered[index]:
                index += 1
            out.append(text[start:index])
    return "".join(out)


_LAZY: dict[str, Any] = {}
RequestModelAuth: type[httpx.Auth]  # made on first access by __getattr__, so httpx loads only when used


def __getattr__(name: str) -> Any:
    if name == "RequestModelAuth":
        if name not in _LAZY:
            _LAZY[name] = _request_auth_class()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            "create_openai_client needs the OpenAI SDK; install it with pip install 'benchmax[openai]'"
        ) from exc
    return openai


def create_openai_client(
    *, model: str, base_url: str, auth: ModelAuth, request_id: str, max_retries: int = 2
) -> OpenAI:
    """A synchronous OpenAI SDK client whose every request is authorised by ``auth``."""
    import httpx

    openai = _openai()
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id=request_id)
    return openai.OpenAI(
        base_url=base_url,
        api_key="benchmax-explicit-auth",  # the SDK insists on one; the real header comes from auth
        http_client=httpx.Client(auth=__getattr__("RequestModelAuth")(auth, context)),
        max_retries=max_retries,
    )


def create_async_openai_client(
    *, model: str, base_url: str, auth: ModelAuth, request_id: str, max_retries: int = 2
) -> AsyncOpenAI:
    """An asynchronous OpenAI SDK client whose every request is authorised by ``auth``."""
    import httpx

    openai = _openai()
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id=request_id)
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key="benchmax-explicit-auth",
        http_client=httpx.AsyncClient(auth=__getattr__("RequestModelAuth")(auth, context)),
        max_retries=max_retries,
    )
