"""Reading a network peer's reply within a bound on its decoded size: the one reader every reply goes through.

What a peer sends is untrusted, and its size on the wire says little: a
gzip bomb of a few MB inflates to gigabytes. So every reply benchmax reads
from a network peer (the model server's completions, its ``GET /models``,
the preflight's 1-token chat, the health gate's probe, a served env's
answers, an embedded server's self-test) is read here, chunk by chunk as it
is decoded, and given up as soon as the decoded bytes pass the caller's
bound: memory stays within a chunk of the bound however far the body would
inflate. Leaving a reply unread closes its connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from benchmax.errors import BenchmaxError

if TYPE_CHECKING:
    import aiohttp

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "ReplyTooLarge", "read_reply", "read_reply_sync"]

DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024
"""The most bytes a model server's reply may hold once decompressed: a long completion with token ids
and logprobs is a few MB, while a gzip bomb of a few hundred kB decodes to gigabytes."""
_CHUNK = 64 * 1024
"""Bytes read at a time from a blocking reply."""


class ReplyTooLarge(BenchmaxError, ValueError):
    """A peer's reply held more than its reader's bound once decoded; the read stopped there."""

    def __init__(self, what: str, limit: int, encoding: str | None) -> None:
        super().__init__(
            f"the reply {what} is larger than {limit:,} bytes once decompressed "
            f"(Content-Encoding: {(encoding or 'none')[:40]}); the read stopped there"
        )
        self.limit = limit


class _Readable(Protocol):
    """A blocking reply body (``http.client.HTTPResponse``, what ``urllib`` returns)."""

    def read(self, amount: int, /) -> bytes: ...


class _Tally:
    """The decoded bytes of one reply, counted as they come; past the bound it raises."""

    __slots__ = ("_chunks", "_encoding", "_limit", "_size", "_what")

    def __init__(self, limit: int, what: str, encoding: str | None) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._limit = limit
        self._what = what
        self._encoding = encoding

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            self._chunks.clear()
            raise ReplyTooLarge(self._what, self._limit, self._encoding)
        self._chunks.append(chunk)

    def body(self) -> bytes:
        return b"".join(self._chunks)


async def read_reply(response: aiohttp.ClientResponse, *, limit: int, what: str) -> bytes:
    """The body of an aiohttp reply, decompressed, given up past ``limit`` bytes (``ReplyTooLarge``).

    aiohttp decompresses as it reads, in bounded steps (since 3.13.3), so the
    read stops within a chunk of ``limit`` however far the body would inflate.
    ``what`` names the reply in the error ("from http://host/v1/models (HTTP 200)").
    """
    tally = _Tally(limit, what, response.headers.get("Content-Encoding"))
    async for chunk in response.content.iter_any():
        tally.add(chunk)
    return tally.body()


def read_reply_sync(response: _Readable, *, limit: int, what: str, encoding: str | None = None) -> bytes:
    """The body of a blocking reply (``urllib``, ``http.client``), given up past ``limit`` bytes.

    These clients decode no ``Content-Encoding`` (they ask for none), so the
    bytes on the wire are the bytes decoded: one bound holds both.
    """
    tally = _Tally(limit, what, encoding)
    while chunk := response.read(min(_CHUNK, limit + 1)):
        tally.add(chunk)
    return tally.body()
