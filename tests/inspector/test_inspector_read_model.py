"""The inspector's API shows the figures the CLI summary prints, and paints where each run stands."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome
from benchmax.inspector import create_app
from benchmax.store import GroupWrite, RunWriter


def _client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))


def test_the_summary_and_the_inspector_agree_on_every_figure(runs_dir: Path) -> None:
    with open_run(runs_dir / "a") as run:
        stats = run.stats(examples=None)
    client = _client(runs_dir)
    overview = client.get("/api/runs/a/overview").json()
    dist = client.get("/api/runs/a/distributions").json()
    examples = client.get("/api/runs/a/examples", params={"sort": "pass_rate", "limit": 500}).json()["rows"]
    listed = {row["run_id"]: row for row in client.get("/api/runs").json()["runs"]}["a"]

    assert (overview["rollouts"], overview["scored"], overview["failed"]) == (
        stats.rollouts, stats.scored, stats.failures
    )  # fmt: skip
    assert (overview["passed"], overview["pass_rate"], overview["pass_threshold"]) == (
        stats.passed, stats.pass_rate, stats.pass_threshold
    )  # fmt: skip
    shown = {name: {k: v for k, v in item.items() if k != "histogram"} for name, item in overview["components"].items()}
    assert shown == {
        name: {"count": c.count, "mean": c.mean, "std": c.std, "min": c.min, "max": c.max, "filled": c.filled}
        for name, c in stats.components.items()
    }  # fmt: skip
    assert {name: item["mean"] for name, item in overview["components"].items()} == listed["components"]
    assert [(item["reason"], item["count"]) for item in overview["reasons"]] == list(stats.reasons.items())
    failed = {item["reason"]: item["count"] - item["scored"] for item in overview["reasons"]}
    assert {reason: count for reason, count in failed.items() if count} == dict(stats.errors)
    assert (dist["groups_with_rollouts"], dist["groups_no_signal"], dist["groups_single"]) == (
        stats.groups, stats.groups_no_signal, stats.groups_single
    )  # fmt: skip
    assert (dist["latency"]["p50"], dist["latency"]["p95"]) == (stats.latency_p50, stats.latency_p95)
    assert (dist["tokens"]["prompt"], dist["tokens"]["completion"]) == (stats.prompt_tokens, stats.completion_tokens)
    assert (dist["turns"], dist["tool_calls"]) == (stats.turns, stats.tool_calls)
    assert dist["wall_seconds"] == stats.wall_seconds
    assert [(row["example_id"], row["passed"], row["rollouts"]) for row in examples] == [
        (example.example_id, example.passed, example.total) for example in stats.examples
    ]
    assert overview["state"] == {"status": "completed", "tone": "ok", "note": None}


def _status_run(path: Path, status: str, *, scored: bool) -> None:
    writer = RunWriter.create(path, {"status": status, "pass_threshold": 1.0})
    writer.add_examples("eval", [Example("e", {"prompt_messages": [{"role": "user", "content": "q"}]})])
    outcome = RolloutOutcome(
        rewards={"x": 1.0} if scored else {},
        termination_reason="finished" if scored else "model_error",
        rollout_id="e#0",
        example_id="e",
    )
    writer.write_group(GroupWrite("eval/e", "e", 0, 0, (outcome,), (0,)))
    writer.fill_batch(0)
    writer.close()


@pytest.mark.parametrize(
    ("status", "scored", "shown", "tone"),
    [
        ("completed", True, "completed", "ok"),
        ("completed", False, "completed", "bad"),
        ("finished", True, "completed", "ok"),
        ("running", True, "running", "info"),
        ("interrupted", True, "interrupted", "warn"),
        ("failed", True, "failed", "bad"),
        ("paused-by-someone", True, "paused-by-someone", "muted"),
    ],
)
def test_each_run_status_is_painted_in_its_tone(tmp_path: Path, status, scored, shown, tone) -> None:
    _status_run(tmp_path / "run", status, scored=scored)
    client = _client(tmp_path / "run")

    (row,) = client.get("/api/runs").json()["runs"]
    overview = client.get("/api/runs/run/overview").json()

    assert row["state"]["status"] == overview["state"]["status"] == shown
    assert row["state"]["tone"] == overview["state"]["tone"] == tone
    if status == "completed" and not scored:
        assert overview["state"]["note"] == "every rollout failed"


def test_the_overview_hands_the_page_the_tables_query_declaration(runs_dir: Path) -> None:
    from benchmax.store import QUERY_SPEC

    overview = _client(runs_dir).get("/api/runs/a/overview").json()
    assert overview["query_spec"] == orjson.loads(orjson.dumps(QUERY_SPEC))
    assert overview["search"] == "words"
