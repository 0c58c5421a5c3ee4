"""``RagEnv``: answer questions by searching a corpus, rewarded for sources actually found and cited.

The default reward has five components, one judge call and the rest counted:

- ``retrieval_hit``: share of the gold sources that appear in search results
  (tool messages). Not gated: it rewards finding the right documents early.
- ``answer_correctness``: the judge's verdict on the ``<answer>`` block, but
  only when retrieval found at least one gold source, so an answer from memory
  earns nothing.
- ``citation_recall``: share of gold sources cited as ``[Source: id]``;
  ``citation_grounding``: share of citations that search actually returned;
  ``answer_length``: a brevity bonus falling to zero at
  :data:`ANSWER_LENGTH_CAP` characters. All three are scaled by correctness.

Each component is multiplied by its weight. A judge failure is not a zero: it
raises :class:`benchmax.rewards.JudgeError` and the rollout ends as
``judge_error``. The free functions below are the pieces, for envs that
override ``compute_reward``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from benchmax.auth import InjectedAuth, ModelAuth
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    Messages,
    Tool,
    canonical_example_id,
)
from benchmax.rag._search import SearchClient, SearchResult
from benchmax.rewards import (
    Judge,
    Rubric,
    answer_block,
    clip01,
    evaluate_single_rubric,
    extract_completion_text,
    search_within_budget,
)

logger = logging.getLogger("benchmax.rag")

_CITATION = re.compile(r"\[Source:\s*([^\]]+)\]", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_HIDDEN_METADATA = frozenset({"content", "_local_hash", "chunk_hash", "char_count"})

MAX_TOOL_OUTPUT_CHARS = 10_000
TOOL_OUTPUT_TRUNCATION_SUFFIX = "\n...[truncated due to character limit]"
SEARCH_EFFICIENCY_DECAY_RATE = 0.2
ANSWER_LENGTH_CAP = 600
"""An answer this long (characters) or longer earns no ``answer_length`` bonus."""

CORRECTNESS_RUBRIC = Rubric(
    title="Answer correctness",
    description="Response correctly answers the question and is factually consistent with the reference answer.",
    polarity="positive",
    score_map={0: "Provided answer is missing or incorrect.", 1: "Fully correct and factually consistent."},
)
CONCISENESS_RUBRIC = Rubric(
    title="Answer conciseness",
    description="Response is concise and avoids unnecessary verbosity while still directly answering the question.",
    polarity="positive",
)
"""Not in the default reward (brevity there is counted); for :func:`judge_answer_quality`."""


class RagSourceScores(TypedDict):
    """The source-level scores of the default reward, before weights and gating."""

    retrieval_hit: float
    citation_recall: float
    citation_grounding: float


def extract_answer_block(text: str) -> str:
    """0.2.x's strict reading: ``benchmax.rewards.answer_block(text, mode="strict")``."""
    return answer_block(text, mode="strict")


def canonicalize_source_id(source_id: str) -> str:
    """Exact matching: the id with surrounding whitespace removed."""
    return str(source_id or "").strip()


def canonicalize_source_id_loose(source_id: str) -> str:
    """Forgiving matching (``RagEnv``'s default): lower case, no directory, no extension.

    ``docs/Geography.md``, ``geography.md`` and ``geography`` all match.
    """
    name = str(source_id or "").strip().lower().rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


Canonicalize = Callable[[str], str]


def extract_source_ids(text: str, *, canonicalize: Canonicalize = canonicalize_source_id) -> set[str]:
    """The ``[Source: id]`` labels in ``text`` (an answer or search results)."""
    ids = {canonicalize(found.strip()) for found in _CITATION.findall(text or "")}
    ids.discard("")
    return ids


def parse_citations(text: str, *, canonicalize: Canonicalize = canonicalize_source_id) -> set[str]:
    """The sources an answer cites as ``[Source: id]``."""
    return extract_source_ids(text, canonicalize=canonicalize)


def extract_reference_ids(
    reference_chunks: list[dict[str, Any]], *, canonicalize: Canonicalize = canonicalize_source_id
) -> set[str]:
    """The gold documents: each chunk's ``metadata.file`` (or ``metadata.file_path``)."""
    ids: set[str] = set()
    for chunk in reference_chunks:
        metadata = chunk.get("metadata", {}) if isinstance(chunk, dict) else None
        if not isinstance(metadata, dict):
            continue
        name = str(metadata.get("file") or metadata.get("file_path") or "").strip()
        if name:
            ids.add(canonicalize(name))
    return ids


def score_citations(
    answer_text: str, reference_chunks: list[dict[str, Any]], *, canonicalize: Canonicalize = canonicalize_source_id
) -> tuple[float, float]:
    """``(recall, precision)`` of the answer's citations against the gold documents; no gold is ``(0, 0)``."""
    gold = extract_reference_ids(reference_chunks, canonicalize=canonicalize)
    if not gold:
        return 0.0, 0.0
    cited = parse_citations(answer_text, canonicalize=canonicalize)
    hits = len(cited & gold)
    return hits / len(gold), (hits / len(cited) if cited else 0.0)


def score_retrieval_sources(
    tool_text: str, reference_chunks: list[dict[str, Any]], *, canonicalize: Canonicalize = canonicalize_source_id
) -> float:
    """Share of the gold documents that search results labelled; the ``retrieval_hit`` signal."""
    gold = extract_reference_ids(reference_chunks, canonicalize=canonicalize)
    if not gold:
        return 0.0
    return len(extract_source_ids(tool_text, canonicalize=canonicalize) & gold) / len(gold)


def score_citation_grounding(
    answer_text: str, tool_text: str, *, canonicalize: Canonicalize = canonicalize_source_id
) -> float:
    """Share of the answer's citations that search actually returned (not cited from memory)."""
    cited = parse_citations(answer_text, canonicalize=canonicalize)
    if not cited:
        return 0.0
    return len(cited & extract_source_ids(tool_text, canonicalize=canonicalize)) / len(cited)


def score_rag_sources(
    answer_text: str,
    tool_text: str,
    reference_chunks: list[dict[str, Any]],
    *,
    canonicalize: Canonicalize = canonicalize_source_id,
) -> RagSourceScores:
    """The three source scores of the default reward."""
    recall, _ = score_citations(answer_text, reference_chunks, canonicalize=canonicalize)
    return {
        "retrieval_hit": score_retrieval_sources(tool_text, reference_chunks, canonicalize=canonicalize),
        "citation_recall": recall,
        "citation_grounding": score_citation_grounding(answer_text, tool_text, canonicalize=canonicalize),
    }


def score_search_efficiency(
    *,
    calls: int,
    correctness: float,
    reference_chunk_count: int,
    max_search_calls: int,
    weight: float,
    decay_rate: float = SEARCH_EFFICIENCY_DECAY_RATE,
) -> float:
    """A bonus for a correct answer that did not search much past ``reference_chunk_count + 2`` calls.

    Not in the default reward: "search less" can fight multi-hop search. Zero
    when incorrect or over ``max_search_calls``; otherwise
    ``weight * correctness * exp(-decay_rate * extra_calls)``.
    """
    if correctness <= 0 or not search_within_budget(calls, max_search_calls):
        return 0.0
    extra = max(0, calls - (reference_chunk_count + 2))
    return weight * correctness * math.exp(-decay_rate * extra)


async def judge_answer_quality(
    *,
    question: str,
    ground_truth: str,
    response: str,
    judge: Judge,
    correctness_rubric: Rubric = CORRECTNESS_RUBRIC,
    conciseness_rubric: Rubric = CONCISENESS_RUBRIC,
) -> tuple[float, float]:
    """``(correctness, conciseness)`` from two concurrent judge calls, each in [0, 1].

    Lenient, as in benchmax 0.2: an empty response or any judge failure gives
    ``(0.0, 0.0)`` (the default reward, by contrast, lets a judge failure end
    the rollout as ``judge_error``).
    """
    if not response.strip():
        return 0.0, 0.0
    try:
        correctness, conciseness = await asyncio.gather(
            *(
                evaluate_single_rubric(
                    rubric, question=question, ground_truth=ground_truth, response=response, judge=judge
                )
                for rubric in (correctness_rubric, conciseness_rubric)
            )
        )
    except Exception:
        logger.warning("judge_answer_quality: the judge failed; scoring (0.0, 0.0)", exc_info=True)
        return 0.0, 0.0
    return clip01(correctness.score), clip01(conciseness.score)


def _render(template: str, **values: Any) -> str:
    """Fill ``{name}`` placeholders that have a value; leave every other brace alone (JSON examples)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


class RagEnv(BaseEnv):
    """Retrieval-augmented QA over any :class:`SearchClient`, with the source-gated reward above.

    Dataset rows (``{split}.jsonl``): ``question``, ``answer`` (the reference)
    and ``reference_chunks`` (gold chunks; their ``metadata.file`` is the
    source id). The model gets one ``search`` tool and ``max_search_calls``
    calls of it; ``max_turns`` defaults to one more than that.

    The judge (``judge_base_url``, ``judge_model``) authenticates with
    ``judge_auth``: ``InjectedAuth("judge")`` by default (bind it with
    :func:`benchmax.auth.bind_model_auth`), ``StaticBearerAuth`` for your own
    endpoint. ``w_*`` weight the components. Subclasses may override
    ``_canonicalize_id`` (id matching), ``_format_results`` (what the model
    sees) or ``compute_reward``; set ``system_prompt`` (e.g. with
    :meth:`render_system_prompt`) as a class attribute or pass it.
    """

    PRIMARY_REWARD_KEY = "answer_correctness"
    system_prompt: str | None = None
    _ZERO_REWARDS = {
        "answer_correctness": 0.0,
        "retrieval_hit": 0.0,
        "citation_recall": 0.0,
        "citation_grounding": 0.0,
        "answer_length": 0.0,
    }
    # The policy model reads this text, so it is benchmax 0.2.5's prompt word for word: an env
    # that renders it shows the model what it showed there (docs/migrating.md, RagEnv).
    SYSTEM_PROMPT_TEMPLATE = """\
Answer the given question by searching over {corpus_description}.

First, reason about the question inside <think>...</think>. You may want to rephrase the
question or break it down into sub-questions.

Call the search tool to retrieve relevant results. After receiving information, reason
about it inside <think>...</think> before either:
(1) issuing a new search query
(2) providing the final answer

Each reasoning step should be grounded in retrieved information.

You can search up to {max_search_calls} times. Break the question down across multiple
search queries to gather comprehensive information.

Recommended approach:
1. If initial results do not contain the answer, re-query with broadened or rephrased language.
2. Reference retrieved chunks to formulate more specific follow-up queries
(e.g. using keywords in chunk content or using metadata).

When you have gathered enough information, return your final answer inside <answer>...</answer>
tags. Cite your sources inline using [Source: <source_id>] next to each claim.
"""

    @classmethod
    def render_system_prompt(cls, *, corpus_description: str, max_search_calls: int) -> str:
        """:attr:`SYSTEM_PROMPT_TEMPLATE` filled in; assign it to ``system_prompt`` in a subclass.

        Pass the same ``max_search_calls`` to the constructor, so the budget the
        prompt states is the one enforced.
        """
        return _render(
            cls.SYSTEM_PROMPT_TEMPLATE, corpus_description=corpus_description, max_search_calls=max_search_calls
        )

    def __init__(
        self,
        search: SearchClient,
        *,
        judge_base_url: str,
        judge_model: str,
        judge_auth: ModelAuth = InjectedAuth("judge"),
        judge_timeout: float = 30.0,
        w_correctness: float = 1.0,
        w_retrieval_hit: float = 0.3,
        w_citation_recall: float = 0.3,
        w_citation_grounding: float = 0.2,
        w_length: float = 0.2,
        max_search_calls: int = 10,
        max_turns: int | None = None,
        system_prompt: str | None = None,
    ) -> None:
        if not judge_base_url or not judge_model:
            raise ValueError(
                "RagEnv requires judge_base_url and judge_model (both non-empty); "
                "declare the judge's credential with judge_auth"
            )
        if isinstance(max_search_calls, bool) or not isinstance(max_search_calls, int) or max_search_calls < 1:
            raise ValueError(f"max_search_calls must be a positive integer, got {max_search_calls!r}")
        if not isinstance(search, SearchClient):
            raise TypeError(
                f"search must implement SearchClient (async search(query, mode, top_k) and available_modes), "
                f"got {type(search).__name__}"
            )
        super().__init__(
            max_turns=max_search_calls + 1 if max_turns is None else max_turns,
            max_tool_calls=max_search_calls,
        )
        self._system_prompt = self.system_prompt if system_prompt is None else system_prompt
        self._search = search
        self._judge = Judge(model=judge_model, base_url=judge_base_url, auth=judge_auth, timeout=judge_timeout)
        self._w_correctness = w_correctness
        self._w_retrieval_hit = w_retrieval_hit
        self._w_citation_recall = w_citation_recall
        self._w_citation_grounding = w_citation_grounding
        self._w_length = w_length
        self._max_search_calls = max_search_calls
        modes = sorted(search.available_modes)
        preferred = [mode for mode in ("hybrid", "lexical") if mode in modes]
        self._default_mode = (preferred or modes or ["lexical"])[0]
        self._tools: dict[str, tuple[Tool, Callable[..., Awaitable[str]]]] = {
            "search": (self._search_tool_schema(modes), self._search_tool)
        }

    def _search_tool_schema(self, modes: Sequence[str]) -> Tool:
        properties: dict[str, Any] = {
            "query": {"type": "string", "description": "Search query string."},
            "limit": {"type": "integer", "description": "Max number of results to return (default 10)."},
        }
        if len(modes) > 1:
            properties["mode"] = {
                "type": "string",
                "enum": list(modes),
                "description": f"Search mode. Available: {list(modes)}. Default: {self._default_mode}.",
            }
        return {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the corpus.",
                "parameters": {"type": "object", "properties": properties, "required": ["query"]},
                "strict": False,
            },
        }

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        path = base_dir / f"{split}.jsonl"
        return JsonlDataset(path, row_to_example=self._example_from_row, max_examples=max_examples)

    async def list_tools(self) -> list[Tool]:
        return [self._tools[name][0] for name in sorted(self._tools)]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if tool_name not in self._tools:
            return f"Error: Unknown tool '{tool_name}'"
        return await self._tools[tool_name][1](**tool_args)

    async def aclose(self) -> None:
        await self._judge.aclose()

    def _example_from_row(self, row: dict[str, Any]) -> Example:
        question = row.get("question", "")
        if not isinstance(question, str):
            raise TypeError(f"RagEnv dataset 'question' must be a string, got {type(question).__name__}")
        messages: Messages = []
        if self._system_prompt:
            messages.append({"role": "system", "content": self._system_prompt})
        messages.append({"role": "user", "content": question})
        payload = {
            "prompt_messages": messages,
            "question": question,
            "ground_truth": row.get("answer"),
            "reference_chunks": row.get("reference_chunks", []),
        }
        return Example(canonical_example_id(payload), payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = answer_block(extract_completion_text(rollout.messages), mode="strict")
        if not answer.strip():
            return dict(self._ZERO_REWARDS)  # no committed answer: a valid attempt that earns nothing
        args = rollout.example_args
        question = str(args.get("question") or args.get("prompt") or "")
        reference = str(args.get("ground_truth") or "")
        chunks = args.get("reference_chunks", [])
        logger.info("[RagEnv] Q: %s\n  GT: %s\n  A: %s", question[:200], reference[:200], answer[:200])
        sources = self._score_rag_sources(answer, self._tool_text(rollout.messages), chunks)
        if sources["retrieval_hit"] <= 0:
            rewards = dict(self._ZERO_REWARDS)
            rewards["retrieval_hit"] = self._w_retrieval_hit * sources["retrieval_hit"]
            logger.info("[RagEnv] rewards=%s", rewards)
            return rewards
        # A failing judge is an infrastructure failure, not a zero the model earned: let it raise.
        verdict = await evaluate_single_rubric(
            CORRECTNESS_RUBRIC, question=question, ground_truth=reference, response=answer, judge=self._judge
        )
        correctness = clip01(verdict.score)
        brevity = clip01(1.0 - len(answer) / ANSWER_LENGTH_CAP)
        rewards = {
            "answer_correctness": self._w_correctness * correctness,
            "retrieval_hit": self._w_retrieval_hit * sources["retrieval_hit"],
            "citation_recall": self._w_citation_recall * sources["citation_recall"] * correctness,
            "citation_grounding": self._w_citation_grounding * sources["citation_grounding"] * correctness,
            "answer_length": self._w_length * brevity * correctness,
        }
        logger.info("[RagEnv] rewards=%s", rewards)
        return rewards

    async def _search_tool(self, query: str, mode: str | None = None, limit: int = 10, **_: Any) -> str:
        if not query:
            return "Error: Missing required parameter: 'query'"
        results = await self._search.search(query=query, mode=mode or self._default_mode, top_k=limit)
        return self._format_results(results)

    def _format_results(self, results: list[SearchResult] | list[dict[str, Any]]) -> str:
        """Search results as the model reads them; each labelled ``[source: id]`` for scoring."""
        if not results:
            return "No results found."
        entries = []
        for number, result in enumerate(results, start=1):
            header = f"{number}."
            if result.get("source", ""):
                header += f" — [source: {result['source']}]"
            if result.get("score", 0.0):
                header += f" (score: {result['score']:.2f})"
            lines = [header]
            shown = {
                key: value
                for key, value in (result.get("metadata") or {}).items()
                if key not in _HIDDEN_METADATA and not key.startswith("_") and value is not None and value != ""
            }
            if shown:
                lines.append(f"   Metadata: {shown}")
            lines.append(f"   Content: {result.get('content', '')}")
            entries.append("\n".join(lines))
        return self._truncate_tool_output("\n".join(entries))

    @staticmethod
    def _truncate_tool_output(
        text: str, max_chars: int = MAX_TOOL_OUTPUT_CHARS, suffix: str = TOOL_OUTPUT_TRUNCATION_SUFFIX
    ) -> str:
        if len(text) <= max_chars:
            return text
        return text[: max(0, max_chars - len(suffix))].rstrip() + suffix

    async def _judge_answer_quality(self, question: str, ground_truth: str, response: str) -> tuple[float, float]:
        return await judge_answer_quality(
            question=question, ground_truth=ground_truth, response=response, judge=self._judge
        )

    def _score_citations(self, answer_text: str, reference_chunks: list[dict[str, Any]]) -> tuple[float, float]:
        return score_citations(answer_text, reference_chunks, canonicalize=self._canonicalize_id)

    def _score_retrieval(self, tool_text: str, reference_chunks: list[dict[str, Any]]) -> float:
        return score_retrieval_sources(tool_text, reference_chunks, canonicalize=self._canonicalize_id)

    def _score_citation_grounding(self, answer_text: str, tool_text: str) -> float:
        return score_citation_grounding(answer_text, tool_text, canonicalize=self._canonicalize_id)

    def _score_rag_sources(
        self, answer_text: str, tool_text: str, reference_chunks: list[dict[str, Any]]
    ) -> RagSourceScores:
        return score_rag_sources(answer_text, tool_text, reference_chunks, canonicalize=self._canonicalize_id)

    def _extract_reference_ids(self, reference_chunks: list[dict[str, Any]]) -> set[str]:
        return extract_reference_ids(reference_chunks, canonicalize=self._canonicalize_id)

    def _parse_citations(self, text: str) -> set[str]:
        return parse_citations(text, canonicalize=self._canonicalize_id)

    def _parse_source_ids(self, text: str) -> set[str]:
        return extract_source_ids(text, canonicalize=self._canonicalize_id)

    def _canonicalize_id(self, source_id: str) -> str:
        """How ids match; override per corpus (return :func:`canonicalize_source_id` for exact paths)."""
        return canonicalize_source_id_loose(source_id)

    @staticmethod
    def _tool_text(messages: Messages) -> str:
        return "\n".join(str(message.get("content") or "") for message in messages if message.get("role") == "tool")
