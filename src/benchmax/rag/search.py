"""benchmax 0.2.x's module path ``benchmax.rag.search``: its names, from where they live now."""

from benchmax.rag._search import SearchClient, SearchResult

__all__ = ["SearchClient", "SearchResult"]
