"""Provider credentials for Harbor's remote sandboxes, exposed only while a trial runs.

Harbor's provider SDKs read their credentials from the process environment.
``sandbox_credentials_scope`` sets them for the duration of the trials that
need them and restores what was there afterwards; scopes with different
credentials wait for each other instead of clobbering the environment. The
credentials select nothing: the Harbor environment config picks the provider.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@runtime_checkable
class SandboxCredentials(Protocol):
    """What one Harbor sandbox provider needs in the environment."""

    @property
    def provider(self) -> str | None: ...

    def host_environment(self) -> Mapping[str, str]: ...


def _secret(value: object, name: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ModalCredentials:
    """Modal's token; ``max_throttle_wait_seconds`` lets Modal retry throttled sandbox creation (0: never)."""

    provider: str = field(default="modal", init=False, repr=False)
    token_id: str = field(repr=False, default="")
    token_secret: str = field(repr=False, default="")
    max_throttle_wait_seconds: int = 60

    def __post_init__(self) -> None:
        _secret(self.token_id, "ModalCredentials.token_id")
        _secret(self.token_secret, "ModalCredentials.token_secret")
        wait = self.max_throttle_wait_seconds
        if isinstance(wait, bool) or not isinstance(wait, int) or wait < 0:
            raise ValueError("ModalCredentials.max_throttle_wait_seconds must be an integer >= 0")

    def host_environment(self) -> Mapping[str, str]:
        return {
            "MODAL_TOKEN_ID": self.token_id,
            "MODAL_TOKEN_SECRET": self.token_secret,
            "MODAL_MAX_THROTTLE_WAIT": str(self.max_throttle_wait_seconds),
        }


@dataclass(frozen=True, slots=True)
class DaytonaCredentials:
    """Daytona: an ``api_key``, or a ``jwt_token`` with an ``organization_id``; ``target`` names a region."""

    provider: str = field(default="daytona", init=False, repr=False)
    api_key: str | None = field(default=None, repr=False)
    jwt_token: str | None = field(default=None, repr=False)
    organization_id: str | None = field(default=None, repr=False)
    target: str | None = None

    def __post_init__(self) -> None:
        uses_key = self.api_key is not None
        uses_jwt = self.jwt_token is not None or self.organization_id is not None
        if uses_key == uses_jwt:
            raise ValueError("DaytonaCredentials need either api_key, or both jwt_token and organization_id")
        if uses_key:
            _secret(self.api_key, "DaytonaCredentials.api_key")
        else:
            _secret(self.jwt_token, "DaytonaCredentials.jwt_token")
            _secret(self.organization_id, "DaytonaCredentials.organization_id")
        if self.target is not None and not self.target:
            raise ValueError("DaytonaCredentials.target must be non-empty when given")

    def host_environment(self) -> Mapping[str, str]:
        if self.api_key is not None:
            values = {"DAYTONA_API_KEY": self.api_key}
        else:
            assert self.jwt_token is not None and self.organization_id is not None
            values = {"DAYTONA_JWT_TOKEN": self.jwt_token, "DAYTONA_ORGANIZATION_ID": self.organization_id}
        if self.target is not None:
            values["DAYTONA_TARGET"] = self.target
        return values


@dataclass(frozen=True, slots=True)
class CustomSandboxCredentials:
    """Any environment variables a custom Harbor environment reads; ``provider`` names it, if you like."""

    values: Mapping[str, str] = field(repr=False, default_factory=dict)
    provider: str | None = None

    def __post_init__(self) -> None:
        if self.provider is not None and not self.provider.strip():
            raise ValueError("CustomSandboxCredentials.provider must be non-empty when given")
        object.__setattr__(self, "values", _checked(self.values))

    def host_environment(self) -> Mapping[str, str]:
        return dict(self.values)


def _checked(values: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise TypeError("sandbox credentials must be a mapping of environment variable names to values")
    checked: dict[str, str] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise ValueError(f"sandbox credential name {key!r} must be a non-empty string without '='")
        _secret(value, f"sandbox credential {key!r}")
        checked[key] = value
    if not checked:
        raise ValueError("sandbox credentials must hold at least one value")
    return checked


_conditions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Condition] = weakref.WeakKeyDictionary()
_active: ContextVar[int | None] = ContextVar("benchmax_harbor_credentials", default=None)
_MISSING = object()
_environment: dict[str, str] | None = None
_users = 0
_saved: dict[str, object] = {}


@asynccontextmanager
async def sandbox_credentials_scope(credentials: SandboxCredentials | None) -> AsyncIterator[None]:
    """Expose ``credentials`` in ``os.environ`` inside the block (re-entrant for the same credentials)."""
    global _environment, _users, _saved
    if credentials is None or _active.get() == id(credentials):
        yield
        return
    if _active.get() is not None:
        raise RuntimeError("cannot nest scopes of different sandbox credentials")
    wanted = _checked(credentials.host_environment())
    loop = asyncio.get_running_loop()
    changed = _conditions.get(loop)
    if changed is None:
        changed = _conditions[loop] = asyncio.Condition()
    async with changed:
        await changed.wait_for(lambda: _environment is None or _environment == wanted)
        if _environment is None:
            _saved = {key: os.environ.get(key, _MISSING) for key in wanted}
            os.environ.update(wanted)
            _environment = wanted
        _users += 1
    token = _active.set(id(credentials))
    try:
        yield
    finally:
        _active.reset(token)
        async with changed:
            _users -= 1
            if not _users:
                for key, value in _saved.items():
                    if value is _MISSING:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value  # type: ignore[assignment]
                _environment, _saved = None, {}
                changed.notify_all()
