"""The search interface ``RagEnv`` retrieves through.

Deliberately small and plain (a protocol and a ``TypedDict``, no SDK types) so
that an implementation holding only connection settings pickles cleanly into
an env bundle and builds its SDK client lazily, on the rollout's event loop.
"""

from __future__ import annotations

from typing import Any, Protocol, TypedDict, runtime_checkable


class SearchResult(TypedDict):
    """One hit, independent of the provider that found it."""

    content: str
    source: str
    metadata: dict[str, Any]
    score: float


@runtime_checkable
class SearchClient(Protocol):
    """What ``RagEnv`` needs from a search backend.

    ``mode`` is ``"vector"``, ``"lexical"``, ``"hybrid"`` or ``"auto"`` (the
    backend picks); results come best first, at most ``top_k`` of them.
    ``available_modes`` is read when the env is constructed, before any bundle
    is shipped, so it must come from local configuration: no I/O, no
    credentials.
    """

    async def search(self, query: str, mode: str = "auto", top_k: int = 10) -> list[SearchResult]: ...

    @property
    def available_modes(self) -> list[str]: ...
