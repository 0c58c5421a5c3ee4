"""RagEnv end to end: a scripted model searches an in-memory corpus, a scripted judge grades."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from benchmax.auth import StaticBearerAuth, bind_model_auth
from benchmax.envs import RolloutRequest
from benchmax.rag import (
    CORRECTNESS_RUBRIC,
    DEFAULT_EMBED_MODEL,
    OpenAIEmbedder,
    RagEnv,
    SearchClient,
    canonicalize_source_id,
    canonicalize_source_id_loose,
    extract_answer_block,
    score_citations,
    score_rag_sources,
    score_search_efficiency,
)
from benchmax.testing import ScriptedServer, embed_text

_MARK = re.compile(r"\[\[score:(\d)\]\]")


@dataclass(frozen=True)
class MemorySearch:
    """Word-overlap search over (source, content) pairs; plain data, so it pickles."""

    documents: tuple[tuple[str, str], ...]
    modes: tuple[str, ...] = ("lexical",)

    @property
    def available_modes(self) -> list[str]:
        return list(self.modes)

    async def search(self, query: str, mode: str = "auto", top_k: int = 10) -> list[dict]:
        words = set(query.lower().split())
        hits = []
        for source, content in self.documents:
            overlap = len(words & set(content.lower().replace(".", "").split()))
            if overlap:
                hits.append({"content": content, "source": source, "metadata": {"file": source}, "score": overlap / 4})
        return sorted(hits, key=lambda hit: -hit["score"])[:top_k]


CORPUS = MemorySearch((("docs/France.md", "Paris is the capital of France."), ("docs/Peru.md", "Lima is in Peru.")))
CHUNKS = [{"content": "Paris is the capital of France.", "metadata": {"file": "docs/France.md"}}]


def judge_policy(body: dict) -> dict:
    prompt = body["messages"][-1]["content"]
    if "FAIL" in prompt:
        return {"content": "I cannot grade this."}
    mark = _MARK.search(prompt.split("Response under evaluation:", 1)[-1])
    return {"content": orjson.dumps({"score": int(mark.group(1)) if mark else 0, "reasoning": "r"}).decode()}


@pytest.fixture
def judge_server():
    with ScriptedServer(judge_policy) as server:
        yield server


@pytest.fixture
def model_server():
    with ScriptedServer() as server:
        yield server


def script(*steps: dict) -> str:
    return f"Answer with sources.\n#script: {orjson.dumps(list(steps)).decode()}"


SEARCH = {"tool_calls": [{"name": "search", "arguments": {"query": "capital of France"}}]}


def make_env(judge_server, steps, **kwargs) -> RagEnv:
    kwargs.setdefault("judge_auth", StaticBearerAuth("sk-judge"))
    return RagEnv(
        CORPUS,
        judge_base_url=judge_server.base_url,
        judge_model="judge",
        system_prompt=script(*steps),
        max_search_calls=2,
        **kwargs,
    )


async def run_one(env: RagEnv, model_server, tmp_path: Path):
    (tmp_path / "train.jsonl").write_text(
        json.dumps({"question": "What is the capital of France?", "answer": "Paris", "reference_chunks": CHUNKS}) + "\n"
    )
    (example,) = await env.create_dataset("train", tmp_path)
    request = RolloutRequest("r1", example, "scripted", model_server.base_url)
    try:
        return (await env.run_group([request]))["r1"]
    finally:
        await env.aclose()


async def test_a_grounded_cited_correct_answer_earns_every_component(judge_server, model_server, tmp_path):
    answer = "Paris [Source: France.md] [[score:1]]"
    env = make_env(judge_server, [SEARCH, {"content": f"<think>found it</think><answer>{answer}</answer>"}])
    outcome = await run_one(env, model_server, tmp_path)
    assert outcome.termination_reason == "finished"
    assert outcome.rewards == pytest.approx(
        {
            "answer_correctness": 1.0,
            "retrieval_hit": 0.3,
            "citation_recall": 0.3,
            "citation_grounding": 0.2,
            "answer_length": 0.2 * (1 - len(answer) / 600),
        }
    )
    tool_result = next(m for m in outcome.messages if m["role"] == "tool")["content"]
    assert tool_result.startswith(
        "1. — [source: docs/France.md] (score: 0.75)\n   Metadata: {'file': 'docs/France.md'}"
    )
    assert judge_server.headers[-1]["Authorization"] == "Bearer sk-judge"
    judged = judge_server.requests[-1]["messages"][-1]["content"]
    assert "Answer correctness" in judged and "Paris" in judged


async def test_an_answer_from_memory_earns_nothing_and_skips_the_judge(judge_server, model_server, tmp_path):
    env = make_env(judge_server, [{"content": "<answer>Paris [Source: France.md] [[score:1]]</answer>"}])
    outcome = await run_one(env, model_server, tmp_path)
    assert outcome.rewards == dict.fromkeys(RagEnv._ZERO_REWARDS, 0.0)
    assert judge_server.counts["requests"] == 0


async def test_no_answer_tag_is_no_answer(judge_server, model_server, tmp_path):
    env = make_env(judge_server, [SEARCH, {"content": "Paris, I think. [[score:1]]"}])
    outcome = await run_one(env, model_server, tmp_path)
    assert outcome.termination_reason == "finished"
    assert set(outcome.rewards.values()) == {0.0}


async def test_a_failing_judge_ends_the_rollout_as_judge_error(judge_server, model_server, tmp_path):
    env = make_env(judge_server, [SEARCH, {"content": "<answer>FAIL</answer>"}])
    outcome = await run_one(env, model_server, tmp_path)
    assert (outcome.termination_reason, outcome.rewards) == ("judge_error", {})


async def test_the_default_judge_credential_is_injected_by_the_runtime(judge_server, model_server, tmp_path):
    steps = [SEARCH, {"content": "<answer>Paris [Source: x] [[score:1]]</answer>"}]
    env = RagEnv(CORPUS, judge_base_url=judge_server.base_url, judge_model="judge", system_prompt=script(*steps))
    with bind_model_auth({"judge": StaticBearerAuth("sk-runtime")}):
        outcome = await run_one(env, model_server, tmp_path)
    assert outcome.rewards["answer_correctness"] == 1.0
    assert judge_server.headers[-1]["Authorization"] == "Bearer sk-runtime"


async def test_the_search_tool_advertises_modes_and_budgets(judge_server):
    env = RagEnv(
        MemorySearch((), modes=("vector", "hybrid", "lexical")),
        judge_base_url=judge_server.base_url,
        judge_model="j",
        max_search_calls=3,
    )
    (tool,) = await env.list_tools()
    mode = tool["function"]["parameters"]["properties"]["mode"]
    assert mode["enum"] == ["hybrid", "lexical", "vector"] and "Default: hybrid" in mode["description"]
    assert (env.max_turns, env.max_tool_calls) == (4, 3)
    assert await env.run_tool("r", "browse") == "Error: Unknown tool 'browse'"
    assert await env.run_tool("r", "search", query="") == "Error: Missing required parameter: 'query'"
    assert await env.run_tool("r", "search", query="nothing matches") == "No results found."
    assert env._truncate_tool_output("x" * 20, max_chars=10, suffix="!") == "xxxxxxxxx!"
    assert isinstance(CORPUS, SearchClient)
    await env.aclose()


def test_rag_env_checks_its_configuration():
    with pytest.raises(ValueError, match="judge_base_url and judge_model"):
        RagEnv(CORPUS, judge_base_url="", judge_model="j")
    with pytest.raises(ValueError, match="max_search_calls"):
        RagEnv(CORPUS, judge_base_url="http://h/v1", judge_model="j", max_search_calls=0)
    with pytest.raises(TypeError, match="must implement SearchClient"):
        RagEnv(object(), judge_base_url="http://h/v1", judge_model="j")


def test_a_subclass_prompt_is_rendered_once_with_its_budget():
    class Docs(RagEnv):
        system_prompt = RagEnv.render_system_prompt(corpus_description="the support docs", max_search_calls=4)

    assert "searching over the support docs" in Docs.system_prompt
    assert "search up to 4 times" in Docs.system_prompt
    assert "{" not in RagEnv.render_system_prompt(corpus_description="x", max_search_calls=1)


def test_the_reward_pieces():
    assert extract_answer_block("think <answer>A</answer> then <answer> B </answer>") == "B"
    assert extract_answer_block("<answer>cut off") == "cut off"
    assert extract_answer_block("no tag at all") == ""
    assert canonicalize_source_id_loose(" docs/Geography.md ") == "geography"
    assert canonicalize_source_id(" a/B.md ") == "a/B.md"
    assert score_citations("[Source: docs/France.md] [Source: x]", CHUNKS) == (1.0, 0.5)
    assert score_citations("[Source: docs/France.md]", []) == (0.0, 0.0)
    scores = score_rag_sources(
        "[Source: france]", "1. [source: docs/France.md]", CHUNKS, canonicalize=canonicalize_source_id_loose
    )
    assert scores == {"retrieval_hit": 1.0, "citation_recall": 1.0, "citation_grounding": 1.0}
    # five calls where 1 + 2 were expected: two extra
    efficiency = score_search_efficiency(calls=5, correctness=1, reference_chunk_count=1, max_search_calls=10, weight=1)
    assert efficiency == pytest.approx(math.exp(-0.2 * 2))
    assert score_search_efficiency(calls=11, correctness=1, reference_chunk_count=1, max_search_calls=10, weight=1) == 0
    assert CORRECTNESS_RUBRIC.allowed_scores == (0.0, 1.0)


async def test_the_embedder_authenticates_each_call_and_keeps_input_order():
    with ScriptedServer(embedding_dims=6) as server:
        embed = OpenAIEmbedder(model=DEFAULT_EMBED_MODEL, base_url=server.base_url, auth=StaticBearerAuth("sk-e"))
        vectors = await embed(["alpha", "beta"])
        assert await embed([]) == []
        assert server.requests[-1] == {"model": "text-embedding-3-large", "input": ["alpha", "beta"]}
        assert server.headers[-1]["Authorization"] == "Bearer sk-e"
    assert vectors == [embed_text("alpha", 6), embed_text("beta", 6)]
    with pytest.raises(TypeError, match="list of strings"):
        await embed("alpha")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ModelAuth"):
        OpenAIEmbedder(model="m", base_url="http://h/v1", auth="sk")  # type: ignore[arg-type]


async def test_a_used_env_and_its_judge_pickle_for_another_process(judge_server, model_server, tmp_path):
    import cloudpickle

    env = make_env(judge_server, [SEARCH, {"content": "<answer>Paris [Source: France.md] [[score:1]]</answer>"}])
    first = await run_one(env, model_server, tmp_path)
    copy = cloudpickle.loads(cloudpickle.dumps(env))  # after real requests: live connections stay behind
    again = await run_one(copy, model_server, tmp_path)
    assert again.rewards == first.rewards
    assert "Bearer sk-judge" in {headers.get("Authorization") for headers in judge_server.headers}
