"""The trainer-facing records and the lower-level ``Environment`` contract."""

from __future__ import annotations

import pickle

import pytest

from benchmax.envs import (
    Environment,
    Example,
    ListDataset,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    StaticBearerAuth,
    Usage,
)

EXAMPLE = Example("ex-1", {"prompt_messages": [{"role": "user", "content": "hi"}]})


def test_a_request_takes_the_0_2_positional_arguments():
    auth = StaticBearerAuth("sk-abc")
    request = RolloutRequest("r1", EXAMPLE, "model-a", "http://h/v1", auth, "eval")
    assert (request.rollout_id, request.model, request.base_url, request.split) == (
        "r1",
        "model-a",
        "http://h/v1",
        "eval",
    )
    assert request.model_auth is auth
    assert request.sampling == SamplingParams()


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"rollout_id": " "}, "rollout_id must be a non-empty string"),
        ({"model": ""}, "model must be a non-empty string"),
        ({"base_url": ""}, "base_url must be a non-empty string"),
        ({"split": "test"}, "split must be 'train' or 'eval', got 'test'"),
        ({"example": {"prompt_messages": []}}, "example must be a benchmax.envs.Example"),
    ],
)
def test_a_request_with_a_bad_field_names_it(kwargs, says):
    fields = {"rollout_id": "r", "example": EXAMPLE, "model": "m", "base_url": "http://h/v1", **kwargs}
    with pytest.raises((ValueError, TypeError), match=says):
        RolloutRequest(**fields)


def test_an_outcome_takes_the_0_2_positional_fields_and_reports_scored():
    outcome = RolloutOutcome({"correct": 1.0}, "finished", None)
    assert (outcome.rewards, outcome.termination_reason, outcome.error) == ({"correct": 1.0}, "finished", None)
    assert outcome.scored
    assert not RolloutOutcome({}, "model_error", "HTTP 500").scored


def test_auth_never_shows_the_key():
    auth = StaticBearerAuth("sk-very-secret")
    assert "sk-very-secret" not in repr(auth)
    assert "sk-very-secret" not in repr(RolloutRequest("r", EXAMPLE, "m", "http://h/v1", auth))
    with pytest.raises(ValueError, match="non-empty"):
        StaticBearerAuth("")


def test_sampling_params_send_only_what_is_set():
    assert SamplingParams().to_body() == {}
    assert SamplingParams(temperature=0.0, stop=("x",), extra_body={"top_k": 5}).to_body() == {
        "temperature": 0.0,
        "stop": ["x"],
        "top_k": 5,
    }


def test_rollout_failure_keeps_reason_and_message_across_pickling():
    failure = RolloutFailure(" sandbox_error ", "docker is down")
    copy = pickle.loads(pickle.dumps(failure))
    assert (copy.termination_reason, copy.message, str(copy)) == ("sandbox_error", "docker is down", "docker is down")
    assert copy.reason == "sandbox_error"


def test_rollout_failure_is_0_2_s_runtime_error_with_a_required_message():
    assert isinstance(RolloutFailure("judge_error", "the judge is down"), RuntimeError)
    with pytest.raises(ValueError, match="non-empty termination_reason"):
        RolloutFailure("", "why")
    with pytest.raises(ValueError, match="non-empty message"):
        RolloutFailure("judge_error", " ")
    with pytest.raises(TypeError):
        RolloutFailure("judge_error")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="cannot terminate as 'finished'"):
        RolloutFailure("finished", "all good")


def test_usage_adds_up():
    total = Usage(3, 4) + Usage(10, 1)
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (13, 5, 18)


class Harness(Environment):
    """An env with its own harness: only ``run_rollout``, no chat loop."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([EXAMPLE.payload])

    async def run_rollout(self, request):
        self.seen.append(request.rollout_id)
        return RolloutOutcome({"len": float(len(request.rollout_id))}, "finished", rollout_id=request.rollout_id)


async def test_the_default_run_group_runs_every_sibling_and_keys_outcomes_by_id():
    env = Harness()
    requests = [RolloutRequest(rid, EXAMPLE, "m", "http://h/v1") for rid in ("a", "bb", "ccc")]
    outcomes = await env.run_group(requests)
    assert {rid: outcome.rewards for rid, outcome in outcomes.items()} == {
        "a": {"len": 1.0},
        "bb": {"len": 2.0},
        "ccc": {"len": 3.0},
    }
    assert sorted(env.seen) == ["a", "bb", "ccc"]


@pytest.mark.parametrize(
    ("requests", "says"),
    [
        ([], "needs at least one request"),
        (
            [RolloutRequest("a", EXAMPLE, "m", "u"), RolloutRequest("a", EXAMPLE, "m", "u")],
            "duplicate rollout IDs",
        ),
        (
            [
                RolloutRequest("a", EXAMPLE, "m", "u"),
                RolloutRequest("b", Example("ex-2", EXAMPLE.payload), "m", "u"),
            ],
            "must target one example",
        ),
    ],
)
async def test_a_malformed_group_is_refused_before_anything_runs(requests, says):
    env = Harness()
    with pytest.raises(ValueError, match=says):
        await env.run_group(requests)
    assert env.seen == []
