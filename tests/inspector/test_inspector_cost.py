"""The run's and each rollout's cost in the inspector, in real headless Chromium, over a real eval.

The eval runs the judged env (two policy turns and one judge call per rollout)
against two scripted servers, priced so the figures are easy to check by hand:
a rollout's policy calls cost $0.002024 and its judge call $0.0011.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from browser_kit import InspectorServer, open_view

import benchmax
from benchmax.client import CacheSettings
from benchmax.testing import ScriptedServer

JUDGED_ENV = f"{Path(__file__).parents[1] / 'runner' / 'support' / 'judged_env.py'}:JudgedEnv"


def _row(word: str, answer: str) -> dict:
    script = [
        {
            "tool_calls": [{"name": "lookup", "arguments": {"word": word}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 400},
        },
        {"content": answer, "usage": {"prompt_tokens": 1200, "completion_tokens": 2}},
    ]
    prompt = f"How long is {word}?\n#script: {json.dumps(script)}"
    return {"prompt_messages": [{"role": "user", "content": prompt}], "answer": answer}


@pytest.fixture(scope="module")
def priced_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("priced")
    data = root / "data"
    data.mkdir()
    rows = [_row("apple", "5"), _row("kiwi", "4")]
    (data / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    prices = root / "prices.toml"
    prices.write_text(
        '[models."scripted"]\nprompt = 1.0\ncached_prompt = 0.5\ncompletion = 2.0\n'
        '[models."judge"]\nprompt = 10.0\ncompletion = 20.0\n'
    )
    judge_reply = {"content": '{"score": 1}', "usage": {"prompt_tokens": 100, "completion_tokens": 5}}
    with ScriptedServer() as policy, ScriptedServer(policy=lambda body: judge_reply) as judge:
        for name in ("first", "replay"):
            # in a thread of its own: the browser fixtures may hold this thread's event loop already
            evaluate = functools.partial(
                benchmax.evaluate,
                JUDGED_ENV,
                env_kwargs={"judge_url": judge.base_url},
                data_dir=data,
                base_url=policy.base_url,
                model="scripted",
                run_dir=root / "runs" / name,
                prices=str(prices),
                cache=CacheSettings(root / "cache"),
            )
            with concurrent.futures.ThreadPoolExecutor(1) as thread:
                assert thread.submit(evaluate).result().verdict.ok
    return root / "runs"


@pytest.fixture(scope="module")
def priced_server(priced_runs: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(priced_runs)
    yield running
    running.stop()


def test_the_run_page_shows_the_runs_cost_with_the_judge_apart(page, priced_server) -> None:
    open_view(page, priced_server.base + "/runs/first", "run")
    card = page.locator(".stat", has_text="cost")
    assert card.locator(".value").inner_text() == "$0.006248"
    assert card.locator(".sub").inner_text() == "judge $0.0022 · 2 calls · policy $0.004048 · 4 calls"
    assert not page.errors


def test_a_replayed_run_shows_it_cost_nothing_and_came_from_the_cache(page, priced_server) -> None:
    open_view(page, priced_server.base + "/runs/replay", "run")
    card = page.locator(".stat", has_text="cost")
    assert card.locator(".value").inner_text() == "$0"
    assert card.locator(".sub").inner_text() == "judge $0 · 0 calls · policy $0 · 0 calls · 6 from the cache"


def test_the_rollout_page_shows_what_its_calls_cost_per_role_and_model(page, priced_server) -> None:
    rollout = page.context.request.get(f"{priced_server.base}/api/runs/first/rollouts?limit=1").json()
    rollout_id = rollout["rows"][0]["rollout_id"]
    open_view(page, f"{priced_server.base}/runs/first/rollouts/{quote(rollout_id, safe='')}", "rollout")
    line = page.locator("p.cost").inner_text()
    assert line == "cost $0.003124 · policy scripted: 2 calls, $0.002024 · judge judge: 1 call, $0.0011"
