"""examples/search: BM25 tools over a shipped corpus, exact-match and citation rewards, group diversity."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from benchmax.envs import BaseRollout, DatasetError, RolloutRequest, SamplingParams
from benchmax.testing import ScriptedServer


def turns(steps: list[dict]):
    return lambda body: steps[min(sum(m["role"] == "assistant" for m in body["messages"]), len(steps) - 1)]


def search(query: str, k: int = 3) -> dict:
    return {"tool_calls": [{"name": "search", "arguments": {"query": query, "k": k}}]}


async def run_all(env, dataset, server, make_engine):
    engine = make_engine(env)
    requests = [RolloutRequest(f"s-{i}", example, "scripted", server.base_url) for i, example in enumerate(dataset)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


async def one_question(env, example_dir, text: str):
    dataset = await env.create_dataset("train", example_dir("search"))
    return [e for e in dataset if text in e.payload["prompt_messages"][-1]["content"]]


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("search").__name__ == "SearchEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_searches_reads_and_cites_scores_one_everywhere(
    load_example, load_policy, example_dir, make_engine, split
):
    env = load_example("search")()
    dataset = await env.create_dataset(split, example_dir("search"))
    with ScriptedServer(load_policy("search")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 6
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        # BM25 put a document holding the answer in the top 3 for every question.
        assert outcome.rewards == {"correct": 1.0, "citation": 1.0, "search_diversity": 1.0}, outcome.messages


async def test_a_model_that_guesses_without_searching_scores_zero(load_example, example_dir, make_engine):
    env = load_example("search")()
    dataset = await env.create_dataset("eval", example_dir("search"), max_examples=3)
    with ScriptedServer(lambda body: {"content": "<answer>Paris</answer> <cite>paris</cite>"}) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in outcomes] == [{"correct": 0.0, "citation": 0.0, "search_diversity": 0.0}] * 3


async def test_citations_score_the_share_of_cited_documents_that_hold_the_answer(
    load_example, example_dir, make_engine
):
    env = load_example("search")()
    dataset = await one_question(env, example_dir, "Who founded the Tessel Observatory")
    replies = {
        "<answer>Ingrid Vael</answer>": 0.0,
        "<answer>Ingrid Vael</answer><cite>ingrid-vael</cite>": 1.0,
        "<answer>Ingrid Vael</answer><cite>ingrid-vael</cite><cite>verdan-pony</cite>": 0.5,
        "<answer>Ingrid Vael</answer><cite>no-such-doc</cite><cite>tessel-observatory</cite>": 0.5,
    }
    for reply, citation in replies.items():
        with ScriptedServer(turns([search("Tessel Observatory founder"), {"content": reply}])) as server:
            (outcome,) = await run_all(env, dataset, server, make_engine)
        assert outcome.rewards == {"correct": 1.0, "citation": citation, "search_diversity": 1.0}, reply


async def test_the_answer_must_be_inside_answer_tags_and_match_exactly(load_example, example_dir, make_engine):
    env = load_example("search")()
    dataset = await one_question(env, example_dir, "Who founded the Tessel Observatory")
    replies = [("Ingrid Vael", 0.0), ("<answer>the ingrid vael.</answer>", 1.0), ("<answer>Vael</answer>", 0.0)]
    for reply, correct in replies:
        with ScriptedServer(lambda body, reply=reply: {"content": reply}) as server:
            (outcome,) = await run_all(env, dataset, server, make_engine)
        assert outcome.rewards["correct"] == correct, reply


async def test_siblings_that_look_at_the_same_documents_share_the_diversity_reward(
    load_example, example_dir, make_engine
):
    env = load_example("search")()
    (example,) = await one_question(env, example_dir, "Who founded the Tessel Observatory")
    queries = {0: "Tessel Observatory", 1: "Tessel Observatory", 2: "Esk trout fishing season"}

    def policy(body):  # sibling k is sent seed k: siblings 0 and 1 search alike, 2 elsewhere
        if sum(m["role"] == "assistant" for m in body["messages"]) == 0:
            return search(queries[body["seed"]], k=2)
        return {"content": "<answer>Ingrid Vael</answer>"}

    with ScriptedServer(policy) as server:
        requests = [
            RolloutRequest(f"g-{k}", example, "scripted", server.base_url, sampling=SamplingParams(seed=k))
            for k in range(3)
        ]
        result = await make_engine(env).run_group(requests)
    diversity = {o.rollout_id: o.rewards["search_diversity"] for o in result.outcomes}
    assert diversity == {"g-0": 0.5, "g-1": 0.5, "g-2": 1.0}


async def test_group_diversity_counts_opened_documents_and_ignores_failed_calls(load_example):
    env = load_example("search")()

    def rollout(rollout_id, calls):
        messages = [{"role": "user", "content": "q"}]
        for index, (name, arguments, result) in enumerate(calls):
            call_id = f"{rollout_id}-{index}"
            function = {"name": name, "arguments": orjson.dumps(arguments).decode()}
            call = {"id": call_id, "type": "function", "function": function}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        return BaseRollout(
            rollout_id=rollout_id,
            messages=messages,
            example_args={"answer": "x"},
            split="train",
            termination_reason="finished",
        )

    hits = orjson.dumps([{"id": "tessel", "title": "Tessel", "snippet": ""}]).decode()
    rollouts = [
        rollout("a", [("search", {"query": "tessel"}, hits), ("open", {"id": "amberday"}, "{}")]),
        rollout("b", [("open", {"id": "amberday"}, "{}"), ("open", {"id": "nope"}, "error: no document")]),
        rollout("c", []),
    ]
    assert await env.compute_group_rewards(rollouts) == [
        {"search_diversity": (1 + 0.5) / 2},
        {"search_diversity": 0.5},
        {"search_diversity": 0.0},
    ]


async def test_search_ranks_with_bm25_and_open_reads_whole_documents(load_example, example_dir):
    env = load_example("search")()
    await env.create_dataset("eval", example_dir("search"), max_examples=1)
    hits = await env.run_tool("r", "search", query="comet orbital period years", k=2)
    assert len(hits) == 2 and hits[0]["id"] == "comet-vael-moss"
    assert hits[0]["snippet"].startswith("Comet Vael-Moss is a periodic comet") and len(hits[0]["snippet"]) == 160
    assert await env.run_tool("r", "search", query="the of and") == []
    assert await env.run_tool("r", "search", query="xylophone zeppelin") == []
    document = await env.run_tool("r", "open", id="lake-ivel")
    assert document["title"] == "Lake Ivel" and "48 metres deep" in document["text"]
    with pytest.raises(Exception, match="no document with id 'lake-ivy'; use an id from the search results"):
        await env.run_tool("r", "open", id="lake-ivy")


async def test_a_broken_corpus_fails_when_the_dataset_is_built_with_file_and_line(load_example, tmp_path, example_dir):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "title": "A", "text": "x"}\n{"id": "a", "title": "B", "text": "y"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: duplicate document id 'a'"):
        await load_example("search")(corpus=corpus).create_dataset("eval", example_dir("search"))
    corpus.write_text('{"id": "a", "text": "x"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:1: expected an object with id, title and text"):
        await load_example("search")(corpus=corpus).create_dataset("eval", example_dir("search"))
