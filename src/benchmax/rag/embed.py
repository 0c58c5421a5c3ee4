"""benchmax 0.2.x's module path ``benchmax.rag.embed``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.auth import ModelAuth, create_async_openai_client  # noqa: F401
from benchmax.rag._embed import DEFAULT_EMBED_MODEL, OpenAIEmbedder

__all__ = ["DEFAULT_EMBED_MODEL", "OpenAIEmbedder"]
