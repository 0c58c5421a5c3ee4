"""Model authentication, resolved immediately before each model request, and keeping secrets out of sight.

One idea per module: the credential providers (``_providers``), the ``--auth``
flag (``_flags``), the OpenAI SDK adapters (``_openai``, loaded on first use so
that ``import benchmax.auth`` stays free of the SDK and httpx) and the masking
of secrets in URLs and texts (``_redact``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmax.auth._flags import AUTH_FLAG_FORM, parse_auth_binding
from benchmax.auth._openai import create_async_openai_client, create_openai_client
from benchmax.auth._providers import (
    BasicAuth,
    EnvironmentKeyAuth,
    InjectedAuth,
    ModelAuth,
    ModelAuthError,
    ModelRequestContext,
    StaticBearerAuth,
    bind_model_auth,
    bound_model_auth,
    portable_model_auth,
)
from benchmax.auth._redact import MASK, mask_secrets, redact_url, redact_urls, request_secrets, split_credentials

if TYPE_CHECKING:
    import httpx

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

for _name in __all__:
    _value = globals().get(_name)
    if isinstance(_value, type) or callable(_value):
        _value.__module__ = __name__
del _name, _value

RequestModelAuth: type[httpx.Auth]  # made on first access by __getattr__, so httpx loads only when used


def __getattr__(name: str) -> Any:
    if name == "RequestModelAuth":
        from benchmax.auth._openai import request_auth_class

        return request_auth_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
