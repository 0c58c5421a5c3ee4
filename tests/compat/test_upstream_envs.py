"""Envs written the way benchmax 0.2.5's users write them give 0.2.5's rewards and reasons here.

Each scenario runs its env file in a fresh interpreter on this project
(``reference_harness.py``) against scripted model and judge servers, and is
compared with what 0.2.5 gave for the same files and scripts
(``reference_0.2.5.json``): the outcomes (termination reason and reward
components of every rollout), what the model was sent (transcripts, tools,
auth headers) and how often the judge was asked. Where this project differs on
purpose, ``Scenario.kept`` holds its outcome and ``docs/migrating.md`` the
reason.
"""

from __future__ import annotations

import difflib
import json
import sys

import pytest
from compat_scenarios import SCENARIOS, Scenario
from compat_support import RECORDED, play

REFERENCE = json.loads(RECORDED.read_text())


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Every scenario run once on this project, shared by the checks below."""
    cache: dict[str, dict] = {}

    def run(scenario: Scenario) -> dict:
        if scenario.name not in cache:
            cache[scenario.name] = play(scenario, sys.executable, tmp_path_factory.mktemp(scenario.name), ours=True)
        return cache[scenario.name]

    return run


def _explain(run: dict) -> str:
    raw = run["raw"]
    if "stage" in raw:
        return f"failed at {raw['stage']}: {raw['error']['type']}: {raw['error']['message']}"
    return json.dumps(run["outcome"])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_rewards_and_termination_reasons_match_0_2_5(scenario, ours):
    run = ours(scenario)
    expected = scenario.kept if scenario.kept is not None else REFERENCE["scenarios"][scenario.name]["outcome"]
    assert run["outcome"] == expected, f"{scenario.name}: {_explain(run)}"


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.kept is None], ids=lambda scenario: scenario.name)
def test_the_model_is_sent_what_0_2_5_sends(scenario, ours):
    run = ours(scenario)
    recorded = REFERENCE["scenarios"][scenario.name]
    if "stage" in recorded["outcome"]:
        # 0.2.5 stopped before any model request (a dataset error): so must we, the same way.
        assert run["outcome"] == recorded["outcome"], f"{scenario.name}: {_explain(run)}"
        assert run["model_requests"] == recorded["model_requests"] == []
        return
    if "stage" in run["raw"]:
        pytest.fail(f"{scenario.name}: {_explain(run)}")
    assert run["model_auth"] == recorded["model_auth"]
    # Whether the judge was asked, and how: this project re-asks once after an unusable reply (docs/migrating.md).
    assert (bool(run["judge_requests"]), run["judge_auth"]) == (
        bool(recorded["judge_requests"]),
        recorded["judge_auth"],
    )
    assert run["model_requests"] == recorded["model_requests"], first_difference(
        scenario.name, recorded["model_requests"], run["model_requests"]
    )


def first_difference(name: str, reference: list[str], ours: list[str]) -> str:
    """The first request that differs, diffed against ours for the same prompt: readable where the lists are not."""
    missing = [json.loads(body)["messages"] for body in reference if body not in ours]
    extra = [json.loads(body)["messages"] for body in ours if body not in reference]
    if not missing or not extra:
        return f"{name}: {len(reference)} requests in 0.2.5, {len(ours)} here"
    theirs = missing[0]
    same_prompt = [messages for messages in extra if messages[:2] == theirs[:2]]
    mine = min(same_prompt or extra, key=lambda messages: abs(len(messages) - len(theirs)))

    def lines(messages: list) -> list[str]:
        return json.dumps(messages, indent=1, sort_keys=True).splitlines()

    diff = difflib.unified_diff(lines(theirs), lines(mine), "0.2.5", "benchmax", n=1, lineterm="")
    return f"{name}: {len(missing)} request(s) differ; the first:\n" + "\n".join(list(diff)[:40])
