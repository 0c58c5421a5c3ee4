"""Who signs a model request: the providers of its headers, resolved just before it is sent.

A ``ModelAuth`` is any object with ``async headers_for_request(context)``: the
headers it returns go on that one request. Resolving at request time (rather
than baking a key into a client) lets a runtime rotate short-lived tokens and
lets an env declare *which* credential it needs (``InjectedAuth("judge")``)
without ever holding it, so an env bundle can be shipped without secrets.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from benchmax.errors import BenchmaxError


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
            raise ValueError("bearer token must be a non-empty string; pass no auth at all for a server without keys")
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
