"""Who may reach a benchmax server on this machine: the access rule the inspector and ``serve`` share.

Loopback clients naming a loopback host, or a token (``Authorization: Bearer``, a
cookie set from a printed ``?token=`` link); a foreign ``Origin`` is refused either
way. It sits below both faces so neither takes it from the other. See docs/serve.md
and docs/inspector.md.
"""

from benchmax.access._guard import (
    COOKIE,
    SAFE_METHODS,
    AccessGuard,
    credential_of,
    is_loopback,
    normalize_origin,
)
from benchmax.access._listen import AccessError, bind, resolve_token
from benchmax.access._token_file import private_token_file

__all__ = [
    "COOKIE",
    "SAFE_METHODS",
    "AccessError",
    "AccessGuard",
    "bind",
    "credential_of",
    "is_loopback",
    "normalize_origin",
    "private_token_file",
    "resolve_token",
]
