"""Judge fixtures: a loopback OpenAI-compatible server whose policy plays the judge."""

from __future__ import annotations

import itertools
import re

import orjson
import pytest

from benchmax.client import RetryPolicy
from benchmax.rewards import Judge
from benchmax.testing import ScriptedServer

FAST_RETRY = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.01)

_BLOCK = re.compile(r"RESPONSE(?: ([AB0-9]+))?:\n<<<\n(.*?)\n>>>", re.DOTALL)


def _responses(body):
    return {label or "": text for label, text in _BLOCK.findall(body["messages"][-1]["content"])}


def _grade(correct, clear, rude):
    return orjson.dumps(
        {
            "correct": {"reason": "checked", "score": correct},
            "clear": {"reason": "fine", "score": clear},
            "rude": {"reason": "polite", "score": rude},
        }
    ).decode()


class JudgePolicy:
    """Grades by keywords in the response; compares and ranks by the numbers in them."""

    def __init__(self):
        self.flaky = itertools.count()

    def __call__(self, body):
        responses = _responses(body)
        if "A" in responses:
            a, b = int(responses["A"]), int(responses["B"])
            winner = "A" if a > b else "B" if b > a else "tie"
            return {"content": orjson.dumps({"reason": "bigger is better", "winner": winner}).decode()}
        if len(responses) > 1:
            order = sorted(responses, key=lambda label: -int(responses[label]))
            return {"content": orjson.dumps({"reason": "by size", "ranking": [int(x) for x in order]}).decode()}
        text = responses[""]
        if "FAIL" in text:
            return {"status": 503, "message": "judge overloaded"}
        if "PROSE" in text:
            return {"content": "I would give it a 7 out of 10."}
        if "RANGE" in text:
            return {"content": _grade(11, 3, 0)}
        if "FLAKY" in text and next(self.flaky) == 0:
            return {"content": '{"correct": {"reason": "cut off'}
        if "FENCED" in text:
            return {"content": f"```json\n{_grade(10, 5, 0)}\n```"}
        if "RUDE" in text:
            return {"content": _grade(5, 3, 1)}
        return {"content": _grade(10, 5, 0)}


@pytest.fixture
def judge_server():
    with ScriptedServer(JudgePolicy()) as server:
        yield server


@pytest.fixture
async def judge(judge_server):
    async with Judge(judge_server.base_url, "judge-model", retry=FAST_RETRY) as judge:
        yield judge


@pytest.fixture
def fast_retry():
    return FAST_RETRY
