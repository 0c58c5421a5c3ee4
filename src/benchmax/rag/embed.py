"""benchmax 0.2.x's module path ``benchmax.rag.embed``: its names, from where they live now."""

from benchmax.rag._embed import DEFAULT_EMBED_MODEL, OpenAIEmbedder

__all__ = ["DEFAULT_EMBED_MODEL", "OpenAIEmbedder"]
