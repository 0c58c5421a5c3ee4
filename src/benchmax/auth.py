"""Authentication of model requests, resolved immediately before each request.

The contract of benchmax 0.2.x: a :class:`ModelAuth` returns the headers of one
request, so a credential can rotate or be injected by the runtime without the
env or the run config ever holding it. Secrets never appear in a repr.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "InjectedAuth",
    "ModelAuth",
    "ModelRequestContext",
    "StaticBearerAuth",
    "bind_model_auth",
]


@dataclass(frozen=True, slots=True)
class ModelRequestContext:
    """Which model request is about to be authorised."""

    base_url: str
    model: str
    rollout_id: str


@runtime_checkable
class ModelAuth(Protocol):
    """Returns the headers of one model HTTP request, just before it is sent."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True, init=False)
class StaticBearerAuth:
    """A fixed API key sent as ``Authorization: Bearer``.

    ``StaticBearerAuth(token)`` as in 0.2.x; ``StaticBearerAuth(api_key=...)``
    is accepted too. An empty key sends no header (local servers need none).
    """

    token: str = field(repr=False)

    def __init__(self, token: str | None = None, *, api_key: str | None = None) -> None:
        if token is not None and api_key is not None:
            raise ValueError("give StaticBearerAuth a token or api_key=, not both")
        value = token if token is not None else api_key
        if not isinstance(value, str):
            raise TypeError("StaticBearerAuth needs the key as a string")
        object.__setattr__(self, "token", value)

    @property
    def api_key(self) -> str:
        return self.token

    @classmethod
    def from_env(cls, variable: str) -> StaticBearerAuth:
        """Read the key from an environment variable, naming it when it is unset."""
        import os

        value = os.environ.get(variable)
        if value is None:
            raise ValueError(f"environment variable {variable} is not set; export the API key there")
        return cls(value)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return self.headers()


_BOUND: ContextVar[Mapping[str, ModelAuth] | None] = ContextVar("benchmax_bound_model_auth", default=None)


@dataclass(frozen=True, slots=True)
class InjectedAuth:
    """A reference by name to credentials the runtime binds with :func:`bind_model_auth`."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("InjectedAuth needs a non-empty name")

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        providers = _BOUND.get()
        provider = providers.get(self.name) if providers is not None else None
        if provider is None:
            raise RuntimeError(f"no model-auth provider is bound for {self.name!r}; bind one with bind_model_auth")
        if isinstance(provider, InjectedAuth):
            raise RuntimeError(f"the provider bound for {self.name!r} is itself an InjectedAuth")
        return await provider.headers_for_request(context)


@contextmanager
def bind_model_auth(providers: Mapping[str, ModelAuth]) -> Iterator[None]:
    """Bind auth providers by name for the current (async) execution context."""
    bound = dict(providers)
    for name, provider in bound.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("model-auth provider names must be non-empty strings")
        if not isinstance(provider, ModelAuth):
            raise TypeError(f"model-auth provider {name!r} does not implement ModelAuth")
    token = _BOUND.set(bound)
    try:
        yield
    finally:
        _BOUND.reset(token)
