"""Judges against a real loopback OpenAI-compatible server whose policy plays the judge."""

from __future__ import annotations

import re

import pytest

from benchmax.envs import BaseEnv, Example, ListDataset, RolloutFailure, StaticBearerAuth, canonical_example_id
from benchmax.rewards import Criterion, Grade, Judge, Rubric, extract_completion_text, parse_reply

RUBRIC = Rubric(
    (
        Criterion("correct", "The response answers the question correctly.", weight=2.0),
        Criterion("clear", "The response is easy to follow.", scale=(1, 5)),
        Criterion("rude", "The response insults the reader.", polarity="negative", scale=(0, 1)),
    ),
    name="quality",
)


async def test_a_good_reply_becomes_a_grade_with_polarity_and_scales_applied(judge):
    grade = await judge.grade(RUBRIC, prompt="What is 2+2?", response="4")
    assert grade.scores == {"correct": 10, "clear": 5, "rude": 0}
    assert grade.total == pytest.approx(1.0)
    rude = await judge.grade(RUBRIC, prompt="What is 2+2?", response="4, RUDE person")
    # correct 0.5*2 + clear 0.5*1 - rude 1*1, over positive weight 3
    assert rude.components == {"correct": 0.5, "clear": 0.5, "rude": -1.0}
    assert rude.total == pytest.approx((1.0 + 0.5 - 1.0) / 3)
    assert rude.rewards() == {
        "quality": pytest.approx(0.5 / 3),
        "quality.correct": 0.5,
        "quality.clear": 0.5,
        "quality.rude": -1.0,
    }
    assert rude.rewards(breakdown=False) == {"quality": pytest.approx(0.5 / 3)}


async def test_the_request_carries_the_schema_rubric_and_reference(judge, judge_server):
    await judge.grade(RUBRIC, prompt=[{"role": "user", "content": "Q?"}], response="4", reference="four")
    body = judge_server.requests[-1]
    assert body["model"] == "judge-model"
    assert body["temperature"] == 0.0
    assert body["response_format"]["json_schema"]["schema"] == RUBRIC.schema()
    prompt = body["messages"][-1]["content"]
    assert "[user] Q?" in prompt and "REFERENCE ANSWER:\n<<<\nfour\n>>>" in prompt
    assert "rude (integer 0..1, higher means the fault is more present)" in prompt


async def test_a_fenced_json_reply_is_accepted(judge):
    grade = await judge.grade(RUBRIC, response="FENCED")
    assert grade.scores["correct"] == 10


async def test_a_malformed_reply_is_retried_once_then_accepted(judge, judge_server):
    grade = await judge.grade(RUBRIC, response="FLAKY")
    assert grade.scores["correct"] == 10
    assert judge_server.counts["requests"] == 2


@pytest.mark.parametrize(
    ("response", "why"),
    [("PROSE", "not a JSON object"), ("RANGE", "at correct/score: 11 is greater than the maximum of 10")],
)
async def test_a_reply_that_never_parses_is_a_judge_error(judge, response, why):
    with pytest.raises(RolloutFailure) as caught:
        await judge.grade(RUBRIC, response=response)
    assert caught.value.reason == "judge_error"
    assert why in caught.value.message
    assert "in 2 attempts" in caught.value.message


async def test_a_failing_endpoint_is_a_judge_error_after_retries(judge, judge_server):
    with pytest.raises(RolloutFailure) as caught:
        await judge.grade(RUBRIC, response="FAIL")
    assert caught.value.reason == "judge_error"
    assert "HTTP 503" in caught.value.message
    assert judge_server.counts["status_503"] == 2


async def test_an_unreachable_judge_holds_its_requests_then_is_a_judge_error_past_the_outage_budget(fast_retry):
    async with Judge("http://127.0.0.1:9/v1", "judge-model", retry=fast_retry, max_outage=0.3) as judge:
        with pytest.raises(RolloutFailure, match=re.escape("judge-model at http://127.0.0.1:9/v1 failed")) as caught:
            await judge.grade(RUBRIC, response="4")
    assert caught.value.termination_reason == "judge_error"
    assert "past the outage budget of 0.3 s" in str(caught.value)


async def test_the_key_comes_from_the_environment_and_stays_out_of_reprs_and_logs(judge_server, monkeypatch, caplog):
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-123")
    with caplog.at_level("DEBUG"):
        async with Judge(judge_server.base_url, "judge-model", api_key_env="JUDGE_KEY") as judge:
            await judge.grade(RUBRIC, response="4")
            assert "sk-secret" not in repr(judge)
    assert judge_server.headers[-1]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in caplog.text
    assert "judge judge-model graded 'quality'" in caplog.text


def test_a_missing_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_JUDGE_KEY is not set"):
        Judge("http://127.0.0.1:9/v1", "m", api_key_env="NO_SUCH_JUDGE_KEY")
    with pytest.raises(ValueError, match="not both"):
        Judge("http://127.0.0.1:9/v1", "m", api_key_env="X", auth=StaticBearerAuth("k"))


async def test_compare_and_rank_follow_the_judges_verdicts(judge):
    assert await judge.compare("9", "3", prompt="biggest?") == 1.0
    assert await judge.compare("3", "9") == 0.0
    assert await judge.compare("5", "5") == 0.5
    assert await judge.rank(["3", "9", "5"]) == [1, 2, 0]
    assert await judge.rank(["only"]) == [0]


def test_parse_reply_is_strict():
    schema = Rubric((Criterion("ok", "fine", scale=(0, 1)),)).schema()
    assert parse_reply('{"ok": {"reason": "r", "score": 1}}', schema) == {"ok": {"reason": "r", "score": 1}}
    for text, why in [
        ('Sure! {"ok": {"reason": "r", "score": 1}}', "not a JSON object"),
        ("[1]", "JSON list, not an object"),
        ('{"ok": {"reason": "r", "score": 1}, "extra": 1}', "Additional properties"),
        ('{"ok": {"reason": "r", "score": 0.5}}', "is not of type 'integer'"),
        ('{"ok": {"score": 1}}', "'reason' is a required property"),
        ("", "empty"),
    ]:
        with pytest.raises(ValueError, match=re.escape(why)):
            parse_reply(text, schema)


def test_rubrics_and_criteria_reject_mistakes_early():
    with pytest.raises(ValueError, match="must start with a letter"):
        Criterion("bad name", "x")
    with pytest.raises(ValueError, match="low < high"):
        Criterion("c", "x", scale=(5, 5))
    with pytest.raises(ValueError, match="weight must be positive"):
        Criterion("c", "x", weight=0)
    with pytest.raises(ValueError, match="repeats criteria"):
        Rubric((Criterion("c", "x"), Criterion("c", "y")))
    only_faults = Grade(Rubric((Criterion("f", "fault", polarity="negative"),)), {"f": 5})
    assert only_faults.total == -0.5


class JudgedEnv(BaseEnv):
    max_turns = 1

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def compute_reward(self, rollout):
        # The prompt is left out: it carries the model's #script line, which the judge server would obey.
        grade = await self.judge.grade(RUBRIC, response=extract_completion_text(rollout.messages))
        return grade.rewards(breakdown=False)


async def test_in_the_engine_a_judge_failure_ends_the_rollout_and_its_logs_stay_with_it(
    judge, make_engine, make_request
):
    def example(answer):
        payload = {"prompt_messages": [{"role": "user", "content": f'q\n#script: [{{"content": "{answer}"}}]'}]}
        return Example(canonical_example_id(payload), payload)

    engine = make_engine(JudgedEnv(judge))
    good = await engine.run_group([make_request(rollout_id="good", example=example("4"))])
    bad = await engine.run_group([make_request(rollout_id="bad", example=example("PROSE"))])
    (ok,), (failed,) = good.outcomes, bad.outcomes
    assert ok.rewards == {"quality": pytest.approx(1.0)}
    assert any("graded 'quality'" in entry.message and entry.phase == "reward" for entry in ok.logs)
    assert (failed.termination_reason, failed.rewards) == ("judge_error", {})
    assert any("rejected" in entry.message for entry in failed.logs)


async def test_a_credential_parameter_of_the_judges_url_stays_out_of_its_errors_logs_and_repr(fast_retry, caplog):
    url = "http://127.0.0.1:9/v1?api_key=sk-judge-in-the-url"
    with caplog.at_level("DEBUG"):
        async with Judge(url, "judge-model", retry=fast_retry, max_outage=0.3) as judge:
            with pytest.raises(RolloutFailure) as caught:
                await judge.grade(RUBRIC, response="4")
            shown = repr(judge)
    assert "judge-model at http://127.0.0.1:9/v1?api_key=*** failed" in str(caught.value)
    for text in (str(caught.value), shown, caplog.text):
        assert "sk-judge-in-the-url" not in text
