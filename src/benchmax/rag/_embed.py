"""Query embeddings from any OpenAI-compatible ``/embeddings`` endpoint, for vector search clients.

Search clients take an optional async ``embed_fn(texts) -> vectors``; this is
one that pickles (it holds only settings) and resolves its credential before
each call, like :class:`benchmax.rewards.Judge`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmax.auth import ModelAuth

DEFAULT_EMBED_MODEL = "text-embedding-3-large"


@dataclass(frozen=True, slots=True)
class OpenAIEmbedder:
    """``await embedder(["query", ...])`` gives one vector per text, in order.

    ``auth`` is any :class:`~benchmax.auth.ModelAuth`: ``InjectedAuth("embedding")``
    when the runtime supplies the key, ``StaticBearerAuth`` for your own endpoint.
    Nothing is read from SDK environment variables.
    """

    model: str
    base_url: str
    auth: ModelAuth
    timeout: float | None = 60.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.auth, ModelAuth):
            raise TypeError("embedding auth must implement ModelAuth (an async headers_for_request(context))")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("embedding model must be non-empty")
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise ValueError("embedding base_url must be non-empty")
        if self.timeout is not None and (
            isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) or self.timeout <= 0
        ):
            raise ValueError(f"embedding timeout must be positive seconds or None, got {self.timeout!r}")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"embedding max_retries must be a non-negative integer, got {self.max_retries!r}")

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise TypeError("embedding input must be a list of strings")
        if not texts:
            return []
        from benchmax.client import HttpModelClient, RetryPolicy

        client = HttpModelClient(
            self.base_url,
            self.auth,
            timeout=self.timeout,
            retry=RetryPolicy(max_attempts=self.max_retries + 1),
        )
        try:
            return await client.request(
                "POST", "/embeddings", _vectors(len(texts)), {"model": self.model, "input": texts}
            )
        finally:
            await client.aclose()


def _vectors(count: int) -> Any:
    def parse(data: dict[str, Any]) -> list[list[float]]:
        items = data.get("data")
        if not isinstance(items, list) or len(items) != count:
            raise ValueError(f"expected {count} embeddings in 'data', got {type(items).__name__}")
        ordered = sorted(items, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
        vectors = []
        for item in ordered:
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
                raise ValueError("each embedding must be a list of numbers")
            vectors.append([float(x) for x in vector])
        return vectors

    return parse
