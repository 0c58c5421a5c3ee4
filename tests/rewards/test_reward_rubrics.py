"""benchmax 0.2's judge surface: titled rubrics, ranking, adaptive rubrics and diversity, against a
real loopback server whose policy plays the judge.

The policy reads what it is shown: a ``[[score:X]]`` mark in a single response
is that response's score; rankings order responses by the number they hold;
adaptive prompts get a fixed pair of rubrics; diversity prompts cluster by
first word.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re

import orjson
import pytest

from benchmax.auth import InjectedAuth, ModelRequestContext, StaticBearerAuth, bind_model_auth
from benchmax.client import RetryPolicy
from benchmax.envs import RolloutFailure
from benchmax.rewards import (
    AdaptiveRubrics,
    ClusterResult,
    Criterion,
    Judge,
    JudgeError,
    LLMDiversityConfig,
    NgramDiversityConfig,
    RankingAnchor,
    Rubric,
    RubricCache,
    cluster_texts,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
    rank_group_rubrics,
    rubric_reward_key,
    scale_by_diversity,
    score_group_rubrics,
    score_rubrics,
)
from benchmax.testing import ScriptedServer

FAST = RetryPolicy(max_attempts=1, backoff_initial=0.001, backoff_max=0.001)
_FENCED = re.compile(r"(?:Response (\d+):|\[(\d+)\])\n<<<\n(.*?)\n>>>", re.DOTALL)
_MARK = re.compile(r"\[\[score:([0-9.]+)\]\]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ACCURATE = Rubric("Accuracy", "States the correct capital.")
CLEAR = Rubric(title="Clarity", description="Easy to follow.", score_map={0: "muddled", 1: "so-so", 2: "clear"})
RUDE = Rubric("Rudeness", "Insults the reader.", polarity="negative")


def _reply(value: object) -> dict[str, object]:
    return {"content": value if isinstance(value, str) else orjson.dumps(value).decode()}


class RubricJudge:
    """Answers this project's rubric, ranking, adaptive and diversity prompts."""

    def __init__(self) -> None:
        self.refusals = 0
        self.replies: list[str] = []

    def __call__(self, body: dict) -> dict[str, object]:
        prompt = body["messages"][-1]["content"]
        if self.refusals:
            self.refusals -= 1
            return {"status": 401, "message": "token expired"}
        if self.replies:
            return _reply(self.replies.pop(0))
        if "positive_rubrics" in prompt:
            return _reply(
                {
                    "positive_rubrics": [{"title": "Names the city", "description": "Names the capital city."}],
                    "negative_rubrics": [{"title": "Hedges", "description": "Refuses to commit to one answer."}],
                }
            )
        items = {int(a or b): text for a, b, text in _FENCED.findall(prompt)}
        if '"assignments"' in prompt:
            return _reply(
                {
                    "assignments": [
                        {"index": i, "cluster_id": t.split()[0].lower(), "label": ""} for i, t in items.items()
                    ]
                }
            )
        if '"ranking"' in prompt:
            tiers: dict[float, list[int]] = {}
            for index, text in items.items():
                tiers.setdefault(float(_NUMBER.search(text).group()), []).append(index)
            ranking = [tiers[value] for value in sorted(tiers, reverse=True)]
            return _reply({"ranking": ranking, "reasoning": "by the numbers"})
        response = prompt.split("Response under evaluation:", 1)[-1]
        if "Names the capital city" in prompt:
            return _reply({"score": 1 if "Paris" in response else 0, "reasoning": "adaptive"})
        if "Refuses to commit" in prompt:
            return _reply({"score": 1 if "maybe" in response else 0, "reasoning": "adaptive"})
        mark = _MARK.search(response)
        score = float(mark.group(1)) if mark else 0
        return _reply(f'<think>weighing it</think>\n```json\n{{"score": {score:g}, "reasoning": "marked"}}\n```')


@pytest.fixture
def policy() -> RubricJudge:
    return RubricJudge()


@pytest.fixture
def server(policy):
    with ScriptedServer(policy) as running:
        yield running


@pytest.fixture
async def judge(server):
    judge = Judge(model="judge-model", base_url=server.base_url, auth=StaticBearerAuth("sk-judge"), retry=FAST)
    yield judge
    await judge.aclose()


def test_a_rubric_is_either_titled_or_a_set_of_criteria_with_one_class():
    assert (ACCURATE.title, ACCURATE.polarity, ACCURATE.score_map, ACCURATE.titled) == (
        "Accuracy",
        "positive",
        None,
        True,
    )
    assert ACCURATE.allowed_scores == (0.0, 1.0)
    assert CLEAR.allowed_scores == (0.0, 1.0, 2.0)
    assert (CLEAR.reward_for(1), CLEAR.reward_for(2)) == (0.5, 1.0)
    assert (RUDE.reward_for(1), RUDE.reward_for(0)) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"raw_score must be one of \[0.0, 1.0, 2.0\]"):
        CLEAR.reward_for(3)
    with pytest.raises(TypeError):
        CLEAR.reward_for(True)
    graded = Rubric((Criterion("correct", "Is right.", scale=(0, 1)),), name="quality")
    assert (graded.title, graded.titled, graded.name) == ("quality", False, "quality")
    assert graded.schema()["required"] == ["correct"]
    with pytest.raises(TypeError, match="set of criteria, which has no allowed_scores"):
        graded.reward_for(1)
    with pytest.raises(TypeError, match="titled rubric, which has no schema"):
        ACCURATE.schema()
    with pytest.raises(TypeError, match="either a set of criteria"):
        Rubric((Criterion("c", "x"),), description="y")
    for bad, why in [
        ({"title": " ", "description": "d"}, "title must be non-empty"),
        ({"title": "t", "description": ""}, "description must be non-empty"),
        ({"title": "t", "description": "d", "polarity": "up"}, "polarity"),
        ({"title": "t", "description": "d", "score_map": {1: "one"}}, "at least two"),
        ({"title": "t", "description": "d", "score_map": {0: "a", 1: " "}}, "descriptions must be non-empty"),
    ]:
        with pytest.raises(ValueError, match=why):
            Rubric(**bad)
    with pytest.raises(TypeError, match="keys must be numeric"):
        Rubric("t", "d", score_map={"0": "a", "1": "b"})


def test_a_titled_rubric_stays_titled_through_dataclasses_replace():
    stricter = dataclasses.replace(CLEAR, title="Clarity (strict)", polarity="negative")
    assert (stricter.title, stricter.polarity, stricter.score_map, stricter.titled) == (
        "Clarity (strict)",
        "negative",
        CLEAR.score_map,
        True,
    )
    assert stricter.reward_for(2) == 0.0


def test_reward_keys_are_snake_case_titles():
    assert rubric_reward_key(Rubric("Answer correctness!", "d")) == "rubric_answer_correctness"
    with pytest.raises(ValueError, match="needs at least one letter or digit"):
        rubric_reward_key(Rubric("???", "d"))


def test_the_judge_takes_0_2_keywords_and_both_positional_orders(server):
    auth = StaticBearerAuth("k")
    spellings = [
        Judge(model="m", base_url=server.base_url, auth=auth),
        Judge("m", server.base_url, auth),
        Judge(server.base_url, "m", auth=auth),
    ]
    assert {(judge.model, judge.base_url, judge.auth) for judge in spellings} == {("m", server.base_url, auth)}
    assert spellings[0].timeout == 60.0 and spellings[0].auth_attempts == 3
    assert Judge(model="m", base_url="http://h/v1", max_retries=2).retry.max_attempts == 3
    with pytest.raises(TypeError, match="got model twice"):
        Judge("m", "http://h/v1", model="m")
    with pytest.raises(ValueError, match="model must be non-empty"):
        Judge(base_url="http://h/v1")
    with pytest.raises(ValueError, match="auth_attempts"):
        Judge(model="m", base_url="http://h/v1", auth_attempts=0)
    with pytest.raises(ValueError, match="timeout"):
        Judge(model="m", base_url="http://h/v1", timeout=0)
    with pytest.raises(TypeError, match="implement ModelAuth"):
        Judge(model="m", base_url="http://h/v1", auth="sk-raw")


async def test_request_json_returns_the_first_object_and_the_raw_reply(judge, policy, server):
    policy.replies = ['Sure. {"a": 1} and later {"b": 2}']
    payload, raw = await judge.request_json("Give JSON", request_id="r-1", max_tokens=64, temperature=0.5)
    assert payload == {"a": 1}
    assert raw == 'Sure. {"a": 1} and later {"b": 2}'
    body = server.requests[-1]
    assert body["messages"] == [{"role": "user", "content": "Give JSON"}]
    assert (body["max_tokens"], body["temperature"]) == (64, 0.5)
    assert server.headers[-1]["Authorization"] == "Bearer sk-judge"


async def test_request_json_without_an_object_is_a_judge_error_after_its_parse_attempts(judge, policy, server):
    policy.replies = ["no json here", "still none"]
    with pytest.raises(JudgeError) as caught:
        await judge.request_json("Give JSON", request_id="r-1")
    assert isinstance(caught.value, RolloutFailure)
    # benchmax 0.2 spells the reason ``termination_reason``; this project's RolloutFailure ``reason``.
    reason = getattr(caught.value, "termination_reason", None) or caught.value.reason
    assert reason == "judge_error"
    assert "no valid reply in 2 attempts" in str(caught.value) and "'still none'" in str(caught.value)
    assert server.counts["requests"] == 2
    with pytest.raises(ValueError, match="prompt must be non-empty"):
        await judge.request_json(" ", request_id="r")
    with pytest.raises(ValueError, match="request_id"):
        await judge.request_json("p", request_id="")


async def test_a_refused_credential_is_resolved_again_and_retried(policy, server):
    rotating = _Rotating()
    judge = Judge(model="m", base_url=server.base_url, auth=rotating, retry=FAST)
    policy.refusals = 1
    policy.replies = ['{"ok": true}']
    assert (await judge.request_json("p", request_id="rid"))[0] == {"ok": True}
    assert [headers["Authorization"] for headers in server.headers] == ["Bearer t1", "Bearer t2"]
    assert rotating.contexts[0] == ModelRequestContext(base_url=server.base_url, model="m", rollout_id="rid")
    policy.refusals = 5
    with pytest.raises(JudgeError, match="judge authentication failed"):
        await judge.request_json("p", request_id="rid")
    await judge.aclose()


class _Rotating:
    def __init__(self) -> None:
        self.numbers = itertools.count(1)
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context):
        self.contexts.append(context)
        return {"Authorization": f"Bearer t{next(self.numbers)}"}


async def test_an_injected_judge_credential_comes_from_the_binding(policy, server):
    judge = Judge(model="m", base_url=server.base_url, auth=InjectedAuth("judge"), retry=FAST)
    policy.replies = ['{"ok": 1}']
    with bind_model_auth({"judge": StaticBearerAuth("sk-bound")}):
        await judge.request_json("p", request_id="r")
    assert server.headers[-1]["Authorization"] == "Bearer sk-bound"
    with pytest.raises(JudgeError, match="No runtime model-auth provider"):
        await judge.request_json("p", request_id="r")
    await judge.aclose()


async def test_one_rubric_scores_one_response(judge, server, caplog):
    with caplog.at_level(logging.INFO, logger="benchmax.rewards.rubric"):
        result = await evaluate_single_rubric(
            CLEAR, question="Capital of France?", response="Paris [[score:1]]", judge=judge, ground_truth="Paris"
        )
    assert (result.score, result.reasoning) == (1.0, "marked")
    assert result.raw_response.startswith("<think>")
    prompt = server.requests[-1]["messages"][-1]["content"]
    assert "Reference answer" in prompt and "- 2: clear" in prompt
    assert "rubric.evaluated title='Clarity'" in caplog.text


async def test_a_score_outside_the_rubric_is_a_judge_error(judge):
    with pytest.raises(JudgeError, match=r"rubric 'Accuracy' evaluation failed: judge score 2 is not one of"):
        await evaluate_single_rubric(ACCURATE, question="q", response="x [[score:2]]", judge=judge)


async def test_score_rubrics_names_each_component_and_skips_the_judge_for_an_empty_answer(judge, server):
    transcript = [{"role": "user", "content": "q"}, {"role": "assistant", "content": " Paris [[score:1]]\n"}]
    rewards = await score_rubrics(
        "r1", transcript, ground_truth="Paris", rubrics=[ACCURATE, RUDE], question="q", judge=judge
    )
    assert rewards == {"rubric_accuracy": 1.0, "rubric_rudeness": 0.0}
    before = server.counts["requests"]
    empty = await score_rubrics("r2", "  ", ground_truth=None, rubrics=[ACCURATE], question="q", judge=judge)
    assert empty == {"rubric_accuracy": 0.0}
    assert server.counts["requests"] == before
    with pytest.raises(ValueError, match="distinct reward keys"):
        await score_rubrics("r", "x", ground_truth=None, rubrics=[ACCURATE, ACCURATE], question="q", judge=judge)


async def test_ranking_scores_follow_places_without_and_with_references(judge):
    plain = await evaluate_rubric_ranking(ACCURATE, question="q", responses=["3", "9", "5"], judge=judge)
    assert plain.scores == (0.0, 1.0, 0.5)
    assert plain.ranking == ((1,), (2,), (0,))
    gold = await evaluate_rubric_ranking(
        ACCURATE, question="q", responses=["3", "9", "5"], judge=judge, ground_truth="7"
    )
    assert gold.scores == pytest.approx((0.0, 1.0, 0.15))
    anchors = (RankingAnchor("4", 0.2, label="weak"), RankingAnchor("8", 0.8))
    anchored = await evaluate_rubric_ranking(
        ACCURATE, question="q", responses=["3", "9", "5"], judge=judge, anchors=anchors
    )
    assert anchored.scores == pytest.approx((0.0, 1.0, 0.5))
    ties = await evaluate_rubric_ranking(ACCURATE, question="q", responses=["5", "5", "1", ""], judge=judge)
    assert ties.scores == (0.75, 0.75, 0.0, 0.0)


async def test_ranking_shortcuts_and_argument_checks(judge, server):
    none = await evaluate_rubric_ranking(ACCURATE, question="q", responses=["", " "], judge=judge)
    one = await evaluate_rubric_ranking(ACCURATE, question="q", responses=["", "x"], judge=judge)
    assert (none.scores, none.reasoning) == ((0.0, 0.0), "All responses are empty")
    assert (one.scores, one.ranking) == ((0.0, 1.0), ((0,),))
    assert server.counts["requests"] == 0
    with pytest.raises(ValueError, match="not both"):
        await evaluate_rubric_ranking(
            ACCURATE, question="q", responses=["1"], judge=judge, ground_truth="g", anchors=[RankingAnchor("a", 0.5)]
        )
    with pytest.raises(ValueError, match="ordered from worst to best"):
        await evaluate_rubric_ranking(
            ACCURATE,
            question="q",
            responses=["1"],
            judge=judge,
            anchors=[RankingAnchor("a", 0.9), RankingAnchor("b", 0.1)],
        )
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        RankingAnchor("a", 1.5)


async def test_a_ranking_that_leaves_out_a_response_is_a_judge_error(judge, policy):
    policy.replies = ['{"ranking": [[0]]}']
    with pytest.raises(JudgeError, match=r"ranking leaves out indices \[1\]"):
        await evaluate_rubric_ranking(ACCURATE, question="q", responses=["1", "2"], judge=judge)


async def test_rank_group_rubrics_gives_each_sibling_its_place(judge):
    rewards = await rank_group_rubrics(
        ["a", "b", "c"], ["3", "9", "5"], ground_truth=None, question="q", judge=judge, rubrics=[ACCURATE]
    )
    assert rewards == [{"rubric_accuracy": 0.0}, {"rubric_accuracy": 1.0}, {"rubric_accuracy": 0.5}]
    with pytest.raises(ValueError, match="unique"):
        await rank_group_rubrics(
            ["a", "a"], ["1", "2"], ground_truth=None, question="q", judge=judge, rubrics=[ACCURATE]
        )


async def test_adaptive_rubrics_are_kept_only_when_they_tell_siblings_apart(judge):
    cache = RubricCache(max_per_polarity=1)
    generated = await generate_adaptive_rubrics(
        question="Capital of France?", ground_truth="Paris", responses=["Paris", "Lyon"], judge=judge
    )
    assert [rubric.title for rubric in generated.all] == ["Names the city", "Hedges"]
    kept = await generate_and_cache_adaptive_rubrics(
        question="Capital of France?", ground_truth="Paris", responses=["Paris", "Lyon", ""], judge=judge, cache=cache
    )
    # "Names the city" scores Paris 1 and Lyon 0; "Hedges" scores both 0 and is dropped.
    assert [rubric.title for rubric in kept.positive] == ["Names the city"]
    assert kept.negative == ()
    assert cache.get("Capital of France?") == kept
    assert cache.get("another question") == AdaptiveRubrics()


def test_the_cache_keeps_the_widest_spread_per_polarity():
    cache = RubricCache(max_per_polarity=2)
    a, b, c = (Rubric(title, "d") for title in ("a", "b", "c"))
    assert not cache.consider("q", a, [1, 1, 1])
    assert cache.consider("q", a, [0, 1])
    assert cache.consider("q", b, [0, 0, 1])
    assert cache.consider("q", c, [0, 1, 0, 1])  # spread 0.5 ties a, beats b (0.47)
    assert [rubric.title for rubric in cache.get("q").positive] == ["a", "c"]
    with pytest.raises(ValueError, match="finite"):
        cache.consider("q", a, [0, float("nan")])


async def test_group_rubrics_add_the_adaptive_mean(judge):
    rewards = await score_group_rubrics(
        ["r1", "r2", "r3"],
        ["Paris [[score:1]]", "Lyon", ""],
        ground_truth="Paris",
        question="Capital of France?",
        judge=judge,
        rubrics=[ACCURATE],
        use_adaptive=True,
    )
    assert rewards == [
        {"rubric_accuracy": 1.0, "rubric_adaptive": 1.0},
        {"rubric_accuracy": 0.0, "rubric_adaptive": 0.0},
        {"rubric_accuracy": 0.0, "rubric_adaptive": 0.0},
    ]


async def test_diversity_divides_rewards_by_cluster_size():
    ngram = await cluster_texts(["the cat sat", "the cat sat!", "dogs bark loudly"], NgramDiversityConfig())
    assert ngram == ClusterResult(cluster_ids=("0", "0", "1"), divisors=(2.0, 2.0, 1.0))
    assert ngram.n_clusters == 2
    scaled, _ = await scale_by_diversity(
        [{"r": 1.0}, {"r": 1.0}, {"r": 0.5}], ["the cat sat", "the cat sat!", "dogs bark"], NgramDiversityConfig()
    )
    assert scaled == [{"r": 0.5}, {"r": 0.5}, {"r": 0.5}]
    assert await cluster_texts([], NgramDiversityConfig()) == ClusterResult((), ())
    assert await cluster_texts(["solo"], NgramDiversityConfig()) == ClusterResult(("0",), (1.0,))
    with pytest.raises(ValueError, match="must be the same length"):
        await scale_by_diversity([{}], [], NgramDiversityConfig())
    with pytest.raises(ValueError, match="similarity_threshold"):
        NgramDiversityConfig(similarity_threshold=2)


async def test_judge_clustering_groups_by_approach(judge, policy):
    config = LLMDiversityConfig(judge=judge)
    result = await cluster_texts(["Bribe the guard", "bribe him", "Climb the wall"], config, context="escape")
    assert (result.cluster_ids, result.divisors) == (("bribe", "bribe", "climb"), (2.0, 2.0, 1.0))
    assert result.raw_response
    policy.replies = ['{"assignments": [{"index": 0, "cluster_id": "x"}]}']
    with pytest.raises(JudgeError, match=r"diversity assignments leave out indices \[1\]"):
        await cluster_texts(["a", "b"], config)
