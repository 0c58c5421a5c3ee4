"""Keeping secrets out of what is shown, stored or forwarded: URLs without credentials, echoes masked.

Every text benchmax shows (banners, errors, the inspector), stores (run
metadata, rollouts) or forwards (the recording proxy) and that may hold a
secret passes through here, one function per kind of text: a URL through
:func:`redact_url`, any other text (or decoded JSON) through :func:`mask_secrets`.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar
from urllib.parse import quote, unquote

from benchmax.auth._providers import BasicAuth

MASK = "***"
"""What stands where a secret was."""
_FRAGMENT = 12
"""Characters of a secret that make an echo of it: a piece this long of a cut or split echo is masked too."""
_GRAM = 6
"""Characters looked up first at every sixth place of a text: only where they belong to a piece of a
secret are the 12-character windows around them looked up (a sixth of the lookups, for texts without
secrets)."""
_SHORTEST_SECRET = 4
"""Shorter values are not masked (a one-letter "secret" would mask every such letter of a message)."""
_SECRET_PARAMETER = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|signature|^sig$|session|cookie|bearer", re.IGNORECASE
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")

_T = TypeVar("_T")


class _Echoes(NamedTuple):
    """The spellings of a set of secrets, as :func:`mask_secrets` looks for them."""

    exact: tuple[str, ...]
    """Spellings of at most 12 characters, found whole."""
    pieces: frozenset[str]
    """Every 12-character piece of the longer spellings."""
    grams: frozenset[str]
    """Every 6-character piece of those pieces."""


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
    An echo is the secret itself, reversed, in hex (either case), percent-encoded
    (its reserved characters or every byte) or in base64 (a proxy echoing the
    ``Authorization`` header), or a piece of one of those at least 12
    characters long (an echo cut at a length limit, or split across fields).
    Every text benchmax stores, shows or forwards that a peer wrote (a reply's
    message, an error body) goes through here, success or error alike.
    Mappings, lists and tuples are masked item by item, keys included.
    """
    echoes = _echo_forms(tuple(secret for secret in secrets if isinstance(secret, str)))
    if not echoes.exact and not echoes.pieces:
        return value
    return _mask_value(value, echoes, 0)


@functools.lru_cache(maxsize=64)
def _echo_forms(secrets: tuple[str, ...]) -> _Echoes:
    """Short spellings to find whole, and the 12-character pieces of the longer ones.

    Cached: a client masks every reply with the same key, and the pieces of a
    key are worked out once."""
    exact: set[str] = set()
    pieces: set[str] = set()
    for secret in secrets:
        if len(secret) < _SHORTEST_SECRET:
            continue
        data = secret.encode()
        every_byte = "".join(f"%{byte:02X}" for byte in data)
        spellings = {
            secret,
            secret[::-1],
            quote(secret, safe=""),
            every_byte,
            every_byte.lower(),
            data.hex(),
            data.hex().upper(),
        }
        exact.update(form for form in spellings if len(form) <= _FRAGMENT)
        for offset in range(3):  # the secret at each alignment within a longer base64 text
            encoded = base64.b64encode(bytes(offset) + data).decode()
            length = offset + len(data)
            # the characters no neighbouring byte changes: past the alignment, before the last partial group
            core = encoded[(0, 2, 3)[offset] : 4 * (length // 3) + length % 3]
            spellings.update((core, core.replace("+", "-").replace("/", "_")))
        for form in spellings:
            pieces.update(form[index : index + _FRAGMENT] for index in range(len(form) - _FRAGMENT + 1))
    grams = {piece[index : index + _GRAM] for piece in pieces for index in range(_FRAGMENT - _GRAM + 1)}
    return _Echoes(tuple(sorted(exact, key=len, reverse=True)), frozenset(pieces), frozenset(grams))


def _mask_value(value: Any, echoes: _Echoes, depth: int) -> Any:
    if isinstance(value, str):
        return _mask_text(value, echoes)
    if depth >= 64:
        return value
    if isinstance(value, Mapping):
        return {
            _mask_value(key, echoes, depth + 1): _mask_value(item, echoes, depth + 1) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        masked = [_mask_value(item, echoes, depth + 1) for item in value]
        return masked if isinstance(value, list) else tuple(masked)
    return value


def _mask_text(text: str, echoes: _Echoes) -> str:
    covered = bytearray(len(text))
    hit = False
    pieces = echoes.pieces
    if pieces:
        # A piece at p holds the 6 characters at the first multiple of 6 from p: look at those
        # only, and at the 12-character windows around one that belongs to a piece.
        last = len(text) - _FRAGMENT
        for gram in range(0, len(text) - _GRAM + 1, _GRAM):
            if text[gram : gram + _GRAM] not in echoes.grams:
                continue
            for index in range(max(0, gram - _GRAM + 1), min(gram, last) + 1):
                if text[index : index + _FRAGMENT] in pieces:
                    covered[index : index + _FRAGMENT] = b"\x01" * _FRAGMENT
                    hit = True
    for form in echoes.exact:
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
