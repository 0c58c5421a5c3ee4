"""The inspector's JSON API and pages over real run stores, through Starlette's test client."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from inspector_runs import API_KEY, MIXTURE_ENVS, XSS, write_synthetic_groups, write_training_run
from starlette.testclient import TestClient

from benchmax.inspector import create_app
from benchmax.store import RunWriter
from benchmax.train import EnvStep


@pytest.fixture
def client(runs_dir: Path) -> TestClient:
    return TestClient(create_app(runs_dir), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))


def _rows(client: TestClient, run: str = "a", **params: object) -> dict:
    response = client.get(f"/api/runs/{run}/rollouts", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_runs_list_shows_size_headline_components_and_failure_rate(client: TestClient) -> None:
    runs = {row["run_id"]: row for row in client.get("/api/runs").json()["runs"]}
    assert set(runs) == {"a", "b"}
    a = runs["a"]
    assert a["rollouts"] == 15 and a["failed"] == 3
    assert a["failure_rate"] == pytest.approx(0.2)
    assert a["components"]["correct"] == pytest.approx(6 / 15)
    assert a["model"] == "scripted" and a["env"].endswith("InspectEnv") and a["bytes"] > 0


def test_overview_counts_reasons_components_and_zero_fills(client: TestClient) -> None:
    overview = client.get("/api/runs/a/overview").json()
    assert overview["rollouts"] == 15 and overview["groups"] == 5 and overview["examples"] == 5
    assert {row["reason"]: row["count"] for row in overview["reasons"]} == {"finished": 12, "model_error": 3}
    assert sum(bar["count"] for bar in overview["components"]["correct"]["histogram"]) == 15
    distributions = client.get("/api/runs/a/distributions").json()
    assert distributions["filled"] == {"correct": 3, "format": 3}
    assert distributions["turns"] == 18 and distributions["tool_calls"] == 6
    assert distributions["latency"]["p95"] >= distributions["latency"]["p50"] > 0


def test_rollout_table_filters_by_reason_component_example_and_text(client: TestClient) -> None:
    assert _rows(client, reason="model_error")["total"] == 3
    assert all(row["termination_reason"] == "model_error" for row in _rows(client, reason="model_error")["rows"])
    correct = _rows(client, c="correct", cmin=1, cmax=1)
    assert correct["total"] == 6 and all(row["rewards"]["correct"]["value"] == 1 for row in correct["rows"])
    assert _rows(client, q="window.__xss")["total"] == 3
    assert _rows(client, failed=1)["total"] == 3
    example = correct["rows"][0]["example_id"]
    assert {row["example_id"] for row in _rows(client, example=example)["rows"]} == {example}


def test_rollout_table_sorts_by_any_column_and_pages(client: TestClient) -> None:
    by_reward = [row["reward"] for row in _rows(client, sort="reward", desc=1)["rows"]]
    assert by_reward == sorted(by_reward, reverse=True)
    by_format = [row["rewards"]["format"]["value"] for row in _rows(client, sort="c:format")["rows"]]
    assert by_format == sorted(by_format)
    first, second = _rows(client, limit=4), _rows(client, limit=4, offset=4)
    assert first["total"] == 15 and len(first["rows"]) == 4
    assert not {r["rollout_id"] for r in first["rows"]} & {r["rollout_id"] for r in second["rows"]}
    assert client.get("/api/runs/a/rollouts", params={"limit": "many"}).status_code == 400


def test_group_view_gives_siblings_advantages_from_group_mean_and_std(client: TestClient) -> None:
    group_id = _rows(client, c="correct", cmin=1)["rows"][0]["group_id"]
    group = client.get(f"/api/runs/a/groups/{quote(group_id, safe='')}").json()
    rewards = [sibling["reward"] for sibling in group["siblings"]]
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    assert group["mean"] == pytest.approx(mean) and group["std"] == pytest.approx(std) and std > 0
    for sibling in group["siblings"]:
        assert sibling["advantage"] == pytest.approx((sibling["reward"] - mean) / std)
    assert group["example"]["payload"]["prompt_messages"]


def test_groups_without_learning_signal_are_listed(client: TestClient) -> None:
    page = client.get("/api/runs/a/groups", params={"no_signal": 1}).json()
    assert page["total"] == 1
    assert page["rows"][0]["no_signal"] and page["rows"][0]["std"] == 0


def test_examples_page_gives_pass_rate_per_example(client: TestClient) -> None:
    page = client.get("/api/runs/a/examples", params={"sort": "pass_rate", "desc": 1}).json()
    assert page["total"] == 5
    assert page["rows"][0]["pass_rate"] == 1.0 and page["rows"][-1]["pass_rate"] == 0.0
    assert "add 1 and 2" in client.get("/api/runs/a/examples").json()["rows"][0]["prompt"]


def test_rollout_detail_has_logs_in_place_rewards_with_fill_flags_and_neighbours(client: TestClient) -> None:
    tool_rollout = _rows(client, sort="num_tool_calls", desc=1)["rows"][0]["rollout_id"]
    record = client.get(f"/api/runs/a/rollouts/{quote(tool_rollout, safe='')}").json()
    placed = {(log["phase"], log["turn"], log["level"]) for log in record["logs"]}
    assert {("tools", 0, "INFO"), ("tools", 0, "ERROR"), ("reward", 1, "WARNING")} <= placed
    traceback = next(log["traceback"] for log in record["logs"] if log["level"] == "ERROR")
    assert "ValueError: the tool tripped on purpose" in traceback
    assert record["rewards"]["correct"] == {"value": 1.0, "filled": False}
    assert len(record["turns"]) == 2 and record["messages"][2]["role"] == "tool"
    assert record["nav"]["prev_sibling"] or record["nav"]["next_sibling"]

    failed = _rows(client, reason="model_error")["rows"][0]["rollout_id"]
    failed_record = client.get(f"/api/runs/a/rollouts/{quote(failed, safe='')}").json()
    assert failed_record["rewards"]["correct"] == {"value": 0.0, "filled": True}
    assert "400" in failed_record["error"]


def test_a_traced_rollout_gives_its_trace_id_and_an_untraced_one_null(tmp_path: Path) -> None:
    writer = RunWriter.create(tmp_path / "traced", {"status": "completed", "model": "m"})
    write_synthetic_groups(writer, 0, 1, traced=True)
    writer.close()
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))
    traced = client.get(f"/api/runs/traced/rollouts/{quote('eval/live0000#0', safe='')}").json()
    untraced = client.get(f"/api/runs/traced/rollouts/{quote('eval/live0000#1', safe='')}").json()
    assert traced["trace_id"] == f"{1:016x}{1:016x}"
    assert untraced["trace_id"] is None


def test_rollout_downloads_as_an_attachment(client: TestClient) -> None:
    rollout_id = _rows(client)["rows"][0]["rollout_id"]
    response = client.get(f"/api/runs/a/download/{quote(rollout_id, safe='')}")
    assert response.status_code == 200
    assert response.headers["content-disposition"].startswith("attachment; filename=")
    assert response.json()["rollout_id"] == rollout_id and "nav" not in response.json()


def test_deep_links_serve_the_page_for_ids_with_slashes_and_hashes(client: TestClient) -> None:
    row = _rows(client)["rows"][0]
    for path in (
        "/",
        "/runs/a",
        f"/runs/a/groups/{quote(row['group_id'], safe='')}",
        f"/runs/a/rollouts/{quote(row['rollout_id'], safe='')}",
        "/compare?a=a&b=b",
    ):
        response = client.get(path)
        assert response.status_code == 200 and 'id="bmx-boot"' in response.text
        assert "script-src 'self'" in response.headers["content-security-policy"]
    assert client.get("/static/app.js").status_code == 200


def test_compare_gives_per_component_and_per_example_deltas(client: TestClient) -> None:
    result = client.get("/api/compare", params={"a": "a", "b": "b"}).json()
    deltas = {row["component"]: row["delta"] for row in result["components"]}
    assert deltas["correct"] == pytest.approx(0.2) and deltas["format"] == pytest.approx(0.0)
    assert result["common"] == 5
    top = result["examples"]["rows"][0]
    assert top["delta"] == pytest.approx(1.0) and top["pass_delta"] == pytest.approx(1.0)
    assert client.get("/api/compare", params={"changed": 1, "a": "a", "b": "b"}).json()["examples"]["total"] == 1
    assert [change for change in result["provenance"] if change["warning"]] == [], "a and b share code and data"


def test_unknown_runs_and_path_tricks_are_not_found(client: TestClient) -> None:
    assert client.get("/api/runs/nope/overview").status_code == 404
    assert client.get("/api/runs/..%2F..%2Fetc/overview").status_code == 404
    assert client.get("/api/runs/a/rollouts/does-not-exist").status_code == 404


def test_untrusted_text_is_only_ever_served_as_json_never_as_markup(client: TestClient) -> None:
    row = _rows(client, q="window.__xss")["rows"][0]
    page = client.get(f"/runs/a/rollouts/{quote(row['rollout_id'], safe='')}")
    assert XSS not in page.text and "<img" not in page.text
    record = client.get(f"/api/runs/a/rollouts/{quote(row['rollout_id'], safe='')}")
    assert record.headers["content-type"] == "application/json"
    assert record.json()["messages"][-1]["content"] == XSS


def test_the_api_key_never_appears_in_any_response(client: TestClient) -> None:
    row = _rows(client)["rows"][0]
    paths = [
        "/api/runs",
        "/api/runs/a/overview",
        "/api/runs/a/distributions",
        "/api/runs/a/rollouts",
        "/api/runs/a/examples",
        "/api/runs/a/groups",
        f"/api/runs/a/groups/{quote(row['group_id'], safe='')}",
        f"/api/runs/a/rollouts/{quote(row['rollout_id'], safe='')}",
        "/api/compare?a=a&b=b",
    ]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200 and API_KEY not in response.text, path
    assert client.get("/api/runs/a/overview").json()["meta"]["config"]["api_key_env"] == "BENCHMAX_INSPECT_TEST_KEY"


def test_a_training_run_serves_its_steps_and_each_steps_rollouts(tmp_path: Path) -> None:
    write_training_run(tmp_path / "train")
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))
    steps = client.get("/api/runs/train/steps").json()["steps"]
    assert [row["step"] for row in steps] == [0, 1, 2]
    assert steps[1]["metrics"]["generated/correct"] == pytest.approx(0.5)
    assert steps[2]["metrics"]["mismatched_rollouts"][0]["rollout_id"] == "step2/train/ex0#1"
    rows = _rows(client, "train", step=1)["rows"]
    assert len(rows) == 2 and {row["group_id"] for row in rows} == {"step1/train/ex1"}
    assert client.get("/api/runs/train/rollouts", params={"step": "one"}).status_code == 400


def test_a_mixture_training_run_serves_each_envs_step_figures(tmp_path: Path) -> None:
    write_training_run(tmp_path / "train", mixture=True)
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))
    steps = client.get("/api/runs/train/steps").json()["steps"]
    assert [sorted(row["metrics"]["envs"]) for row in steps] == [sorted(MIXTURE_ENVS)] * 3
    math, code = (steps[2]["metrics"]["envs"][name] for name in MIXTURE_ENVS)
    assert math == {
        "reward": 0.5,
        "components": {"exact": 0.5},
        "rollouts": 2,
        "scored": 2,
        "groups_drawn": 1,
        "groups_dead": 0,
    }
    assert (code["groups_dead"], code["groups_drawn"], code["components"]) == (1, 2, {"tests_passed": 0.75})
    expected = EnvStep(MIXTURE_ENVS[1], 0.75, {"tests_passed": 0.75}, 4, 4, 2, 1)
    assert EnvStep.from_json(MIXTURE_ENVS[1], code) == expected


def test_an_eval_run_has_no_steps(client: TestClient) -> None:
    assert client.get("/api/runs/a/steps").json() == {"steps": []}


def test_every_row_a_person_reads_carries_a_short_id_beside_its_full_example_id(client: TestClient) -> None:
    """The short id is the run's unique prefix (``benchmax.store.short_ids``); the full id stays for links."""
    from benchmax.store import RunQueries, is_digest

    rows = _rows(client)["rows"]
    first = rows[0]
    assert is_digest(first["example_id"]) and len(first["example_id"]) == 64
    with RunQueries(client.app.state.catalog.root / "a") as run:
        expected = run.short_ids([row["example_id"] for row in rows])
    pages = [
        rows,
        client.get("/api/runs/a/examples").json()["rows"],
        client.get("/api/runs/a/groups").json()["rows"],
        _rows(client, q="window.__xss")["rows"],
        client.get("/api/compare", params={"a": "a", "b": "b"}).json()["examples"]["rows"],
    ]
    group = client.get(f"/api/runs/a/groups/{quote(first['group_id'], safe='')}").json()
    rollout = client.get(f"/api/runs/a/rollouts/{quote(first['rollout_id'], safe='')}").json()
    for row in [*(row for page in pages for row in page), group, *group["siblings"], rollout]:
        assert row["short_id"] == expected[row["example_id"]]
        assert 8 <= len(row["short_id"]) < len(row["example_id"]) and row["example_id"].startswith(row["short_id"])
    assert len({row["short_id"] for row in client.get("/api/runs/a/examples").json()["rows"]}) == 5
