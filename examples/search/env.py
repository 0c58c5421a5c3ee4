"""Answer questions from a local document collection with BM25 search, citing sources.

``corpus.jsonl`` holds short articles about the (invented) Verdan Isles, so a
model cannot answer from memory: it must search. The index is ``bm25s``,
built once per env on first use. Tools: ``search(query, k)`` returns ids,
titles and snippets; ``open(id)`` returns a whole document.

Rewards, per rollout: ``correct`` (the ``<answer>`` exactly matches, after
normalising case, punctuation and articles) and ``citation`` (the share of
the ``<cite>``d ids whose document contains the gold answer; 0.0 with no
citations, so citing everything does not pay). Per sibling group:
``search_diversity``, how much of what a rollout looked at its siblings did
not: each document it retrieved or opened counts 1/k when k siblings of the
group touched it, averaged over its documents.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import orjson

from benchmax.envs import BaseEnv, BaseRollout, DatasetError, DatasetSplit, JsonlDataset, Tool, ToolError
from benchmax.rewards import exact_match, extract_answer, extract_completion_text, tool_calls

SNIPPET_CHARS = 160
MAX_K = 10

_CITE = re.compile(r"<cite>\s*(.*?)\s*</cite>", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "BM25 keyword search over the documents; returns ids, titles and snippets, best first.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_K,
                        "description": "How many results (default 5).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open",
            "description": "Read a whole document by its id (from search results).",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": False,
            },
        },
    },
]


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    text: str


def load_corpus(path: Path) -> dict[str, Document]:
    """Read ``{"id", "title", "text"}`` lines; a bad or duplicate line fails with ``file:line``."""
    documents: dict[str, Document] = {}
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        raise DatasetError(f"{path}: corpus file not found") from None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = orjson.loads(raw)
            document = Document(str(row["id"]), str(row["title"]), str(row["text"]))
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise DatasetError(f"{path}:{number}: expected an object with id, title and text ({exc})") from None
        if document.id in documents:
            raise DatasetError(f"{path}:{number}: duplicate document id {document.id!r}")
        documents[document.id] = document
    if not documents:
        raise DatasetError(f"{path}: the corpus is empty")
    return documents


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def contains_answer(text: str, answer: str) -> bool:
    """Whether ``answer`` occurs in ``text`` as a run of whole words (case and punctuation ignored)."""
    want, got = _words(answer), _words(text)
    return bool(want) and any(got[i : i + len(want)] == want for i in range(len(got) - len(want) + 1))


def looked_at(messages: Sequence[Any]) -> set[str]:
    """Ids of documents a transcript's ``search`` calls returned or its ``open`` calls read."""
    seen: set[str] = set()
    for call in tool_calls(messages):
        if call.result is None or call.result.startswith("error:"):
            continue
        try:
            if call.name == "search":
                seen.update(str(hit["id"]) for hit in orjson.loads(call.result))
            elif call.name == "open":
                seen.add(str(orjson.loads(call.arguments)["id"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return seen


def diversity(seen: Sequence[set[str]]) -> list[float]:
    """Per rollout: the mean of 1/k over its documents, k = siblings that saw the document."""
    counts = Counter(doc for docs in seen for doc in docs)
    return [sum(1 / counts[doc] for doc in docs) / len(docs) if docs else 0.0 for docs in seen]


class SearchEnv(BaseEnv):
    """``corpus``: another ``.jsonl`` collection to search (default: the one beside this file)."""

    max_turns = 8
    max_tool_calls = 12

    def __init__(self, *, corpus: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.corpus_path = Path(corpus or Path(__file__).with_name("corpus.jsonl")).resolve()
        self._documents: dict[str, Document] | None = None
        self._ids: list[str] = []
        self._index: bm25s.BM25 | None = None
        self._index_lock = asyncio.Lock()

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        await self._ready()  # a broken corpus fails here, before any model call

        def checked(row: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(row.get("answer"), str) or not row["answer"].strip():
                raise DatasetError("'answer' must be a non-empty string")
            return row

        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=checked, max_examples=max_examples)

    async def _ready(self) -> tuple[dict[str, Document], bm25s.BM25]:
        async with self._index_lock:
            if self._index is None:
                self._documents, self._index = await asyncio.to_thread(self._build)
                self._ids = list(self._documents)
        assert self._documents is not None
        return self._documents, self._index

    def _build(self) -> tuple[dict[str, Document], bm25s.BM25]:
        documents = load_corpus(self.corpus_path)
        tokens = bm25s.tokenize(
            [f"{doc.title}\n{doc.text}" for doc in documents.values()], stopwords="en", show_progress=False
        )
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        return documents, index

    def _search(self, index: bm25s.BM25, query: str, k: int) -> list[tuple[str, float]]:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not tokens[0]:
            return []
        found, scores = index.retrieve(tokens, k=min(k, len(self._ids)), show_progress=False)
        return [(self._ids[i], float(s)) for i, s in zip(found[0], scores[0], strict=True) if s > 0]

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        documents, index = await self._ready()
        if tool_name == "search":
            hits = await asyncio.to_thread(self._search, index, tool_args["query"], tool_args.get("k", 5))
            return [
                {"id": doc_id, "title": documents[doc_id].title, "snippet": documents[doc_id].text[:SNIPPET_CHARS]}
                for doc_id, _ in hits
            ]
        if tool_name == "open":
            document = documents.get(tool_args["id"])
            if document is None:
                raise ToolError(f"no document with id {tool_args['id']!r}; use an id from the search results")
            return {"id": document.id, "title": document.title, "text": document.text}
        raise ToolError(f"unknown tool {tool_name!r}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        documents, _ = await self._ready()
        text = extract_completion_text(rollout.messages)
        gold = rollout.example_args["answer"]
        cited = [doc_id.strip() for doc_id in _CITE.findall(text)]
        supported = sum(doc_id in documents and contains_answer(documents[doc_id].text, gold) for doc_id in cited)
        return {
            "correct": exact_match(extract_answer(text, order=("tag",)), gold),
            "citation": supported / len(cited) if cited else 0.0,
        }

    async def compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> list[dict[str, float]]:
        scores = diversity([looked_at(rollout.messages) for rollout in rollouts])
        return [{"search_diversity": score} for score in scores]
