"""A RagEnv over an in-memory corpus, in the style of benchmax 0.2's chroma_rag example."""

from dataclasses import dataclass

from benchmax.auth import StaticBearerAuth
from benchmax.rag import RagEnv, SearchResult

DOCUMENTS = (
    ("docs/France.md", "Paris is the capital of France.", {"file": "docs/France.md", "section": "capitals"}),
    ("docs/Peru.md", "Lima is the capital of Peru.", {"file": "docs/Peru.md"}),
    ("docs/Rivers.md", "The Seine flows through Paris.", {"file": "docs/Rivers.md", "_hidden": "x"}),
)


@dataclass(frozen=True)
class InMemorySearch:
    """Word-overlap search; only plain data, so it pickles into a bundle."""

    top_k_cap: int = 5

    @property
    def available_modes(self) -> list[str]:
        return ["lexical"]

    async def search(self, query: str, mode: str = "auto", top_k: int = 10) -> list[SearchResult]:
        words = set(query.lower().split())
        hits: list[SearchResult] = []
        for source, content, metadata in DOCUMENTS:
            overlap = len(words & set(content.lower().rstrip(".").split()))
            if overlap:
                hits.append({"content": content, "source": source, "metadata": dict(metadata), "score": overlap / 5})
        hits.sort(key=lambda hit: -hit["score"])
        return hits[: min(top_k, self.top_k_cap)]


class CapitalsRagEnv(RagEnv):
    system_prompt = RagEnv.render_system_prompt(corpus_description="a small atlas", max_search_calls=2)

    def __init__(self, judge_base_url: str, script: str = "", judge_token: str | None = "sk-judge") -> None:
        kwargs = {} if judge_token is None else {"judge_auth": StaticBearerAuth(judge_token)}
        super().__init__(
            InMemorySearch(),
            judge_base_url=judge_base_url,
            judge_model="judge",
            max_search_calls=2,
            system_prompt=f"{self.system_prompt}\n{script}",
            **kwargs,
        )
