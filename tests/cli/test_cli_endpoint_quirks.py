"""``benchmax eval`` against servers as they are met: no ``GET /models`` (404, 405, 501 with an
HTML page, or no route), one transient 503, and ``/models`` listing other names than ``--model``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runkit import ENV_SPEC, answers_policy, row, run_cli, write_split

from benchmax import open_run
from benchmax.testing import ScriptedServer

ROUTES: dict[str, dict[str, Any]] = {
    "lists-models": {},
    "no-route": {"models": None},
    "404-html": {"models_status": 404},
    "405-html": {"models_status": 405},
    "501-html": {"models_status": 501},
}
BLIP = [{"fail": {"status": 503, "times": 1}, "content": "7"}]


def _eval(tmp_path: Path, server: ScriptedServer, *extra: str) -> Any:
    return run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
        "--run-dir", tmp_path / "run", "--no-progress", *extra,
    )  # fmt: skip


@pytest.mark.parametrize("route", list(ROUTES))
def test_eval_runs_whatever_routes_the_server_has_and_one_503_costs_one_retry(tmp_path, route):
    # Two 503s: the server's very first chat request (the preflight's, where /models is
    # missing; else a rollout's) and one rollout's first attempt.
    write_split(tmp_path / "data", [row("4"), row("7", script=BLIP)])
    with ScriptedServer(policy=answers_policy, fail_first=(503,), **ROUTES[route]) as server:
        result = _eval(tmp_path, server, "--model", "scripted")

    assert result.returncode == 0, result.stdout
    assert "<" not in result.stdout, "an error page is summarised, never printed"
    assert server.counts["status_503"] == 2
    preflight_chat = 0 if route == "lists-models" else 1
    assert server.counts["requests"] == 2 + 2 + preflight_chat, "two rollouts, one retry per 503"
    with open_run(tmp_path / "run") as run:
        assert not run.meta.get("outages"), "a 503 is no outage"
        records = list(run.rollouts())
    assert sorted((record.termination_reason, record.rewards.get("correct")) for record in records) == [
        ("finished", 1.0),
        ("finished", 1.0),
    ]


@pytest.mark.parametrize("route", ["404-html", "501-html"])
def test_an_error_page_that_stops_the_preflight_is_said_in_one_line(tmp_path, route):
    # /models missing and chat answering 502 every time: the run cannot start.
    write_split(tmp_path / "data", [row("4")])
    with ScriptedServer(policy=answers_policy, fail_first=(502,) * 50, **ROUTES[route]) as server:
        result = _eval(tmp_path, server, "--model", "scripted")

    assert result.returncode == 1, result.stdout
    assert "answers a 1-token chat request with HTTP 502 (502 Bad Gateway (an HTML page))" in result.stdout
    assert "<" not in result.stdout and "padding comment" not in result.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("listed", "extra", "code", "model"),
    [
        (("served-model",), ("--model", "gpt-4o-mini"), 2, None),
        (("served-model",), (), 0, "served-model"),
        (("served-model",), ("--model", "served-model"), 0, "served-model"),
        (("served-model",), ("--model", "gpt-4o-mini", "--no-model-check"), 0, "gpt-4o-mini"),
        (("gpt-4o-2024-08-06", "gpt-4o-mini"), ("--model", "gpt-4o"), 0, "gpt-4o"),
        (("a-model", "b-model"), (), 2, None),
        (None, ("--model", "gpt-4o-mini"), 0, "gpt-4o-mini"),
    ],
    ids=["not-served", "the-one-served", "served", "unchecked", "alias", "several-unnamed", "no-list"],
)
def test_eval_refuses_a_model_the_server_does_not_list_before_any_rollout(tmp_path, listed, extra, code, model):
    write_split(tmp_path / "data", [row("4")])
    with ScriptedServer(policy=answers_policy, models=listed) as server:
        result = _eval(tmp_path, server, *extra)

    assert result.returncode == code, result.stdout
    if code == 2:
        assert "served-model" in result.stdout or "a-model, b-model" in result.stdout
        assert "--model" in result.stdout
        assert server.counts["requests"] == 0, "no rollout was run"
        assert not (tmp_path / "run").exists(), "no run dir for a refused model"
        return
    with open_run(tmp_path / "run") as run:
        assert run.meta["model"] == model
    assert {body["model"] for body in server.requests if body.get("max_tokens") != 1} == {model}
