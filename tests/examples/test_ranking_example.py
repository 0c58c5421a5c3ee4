"""examples/ranking: siblings are compared by ``compute_group_rewards``."""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import RolloutRequest
from benchmax.testing import ScriptedServer


def answering(templates: list[str | dict], answers: dict[str, str]):
    """A policy giving each request for the same question the next template, in turn."""
    counters: dict[str, itertools.count] = defaultdict(itertools.count)

    def policy(body: dict) -> dict:
        question = body["messages"][-1]["content"]
        template = templates[next(counters[question]) % len(templates)]
        if isinstance(template, dict):
            return template
        return {"content": template.format(answer=answers[question])}

    return policy


async def run_groups(load_example, example_dir, make_engine, templates):
    env = load_example("ranking")()
    dataset = await env.create_dataset("eval", example_dir("ranking"))
    answers = {ex.payload["prompt_messages"][-1]["content"]: ex.payload["answer"] for ex in dataset}
    engine = make_engine(env, EngineConfig(retry=RetryPolicy(max_attempts=1)))
    results = []
    with ScriptedServer(answering(templates, answers)) as server:
        for index, example in enumerate(dataset):
            requests = [
                RolloutRequest(f"e{index}s{s}", example, "scripted", server.base_url) for s in range(len(templates))
            ]
            results.append(await engine.run_group(requests))
    return results, set(answers.values())


def by_answer(result) -> dict[str, dict[str, float]]:
    return {
        outcome.messages[-1]["content"]: dict(outcome.rewards)
        for outcome in result.outcomes
        if outcome.termination_reason == "finished"
    }


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("ranking").__name__ == "RankingEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_the_shipped_data_loads(load_example, example_dir, split):
    dataset = await load_example("ranking")().create_dataset(split, example_dir("ranking"))
    assert len(dataset) >= 3
    assert all(isinstance(example.payload["answer"], str) for example in dataset)


async def test_the_shortest_correct_sibling_wins(load_example, example_dir, make_engine):
    templates = [
        "Well, I believe the answer is {answer}.",
        "{answer}",
        "I have no idea.",
        "It is {answer}.",
    ]
    results, bare_answers = await run_groups(load_example, example_dir, make_engine, templates)
    for result in results:
        scores = by_answer(result)
        assert len(scores) == 4
        for answer, rewards in scores.items():
            if answer == "I have no idea.":
                assert rewards == {"correct": 0.0, "shortest_correct": 0.0}
            elif answer in bare_answers:
                assert rewards == {"correct": 1.0, "shortest_correct": 1.0}
            else:
                assert rewards == {"correct": 1.0, "shortest_correct": 0.0}
        assert result.logs == ()


async def test_equal_length_correct_answers_share_the_win(load_example, example_dir, make_engine):
    results, _ = await run_groups(load_example, example_dir, make_engine, ["{answer}", "{answer}", "So: {answer}"])
    for result in results:
        wins = sorted(o.rewards["shortest_correct"] for o in result.outcomes)
        assert wins == [0.0, 1.0, 1.0]


async def test_with_no_correct_sibling_nobody_wins(load_example, example_dir, make_engine):
    results, _ = await run_groups(load_example, example_dir, make_engine, ["no", "maybe"])
    for result in results:
        assert [o.rewards for o in result.outcomes] == [{"correct": 0.0, "shortest_correct": 0.0}] * 2


async def test_a_failed_sibling_gets_nothing_and_does_not_block_the_winner(load_example, example_dir, make_engine):
    templates = [{"status": 400, "message": "bad request"}, "The answer: {answer}", "{answer}!!"]
    results, _ = await run_groups(load_example, example_dir, make_engine, templates)
    for result in results:
        failed = [o for o in result.outcomes if o.termination_reason == "model_error"]
        assert len(failed) == 1 and failed[0].rewards == {}
        scores = by_answer(result)
        assert sorted(r["shortest_correct"] for r in scores.values()) == [0.0, 1.0]
        winner = next(a for a, r in scores.items() if r["shortest_correct"] == 1.0)
        assert winner.endswith("!!")
