"""``--auth NAME=URL[@VAR]``: how a command line binds a named credential to one server."""

from __future__ import annotations

import re

from benchmax.auth._providers import EnvironmentKeyAuth, ModelAuthError

AUTH_FLAG_FORM = "NAME=URL or NAME=URL@VAR"
"""How ``--auth`` is written (eval, validate, rescore, train)."""
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
