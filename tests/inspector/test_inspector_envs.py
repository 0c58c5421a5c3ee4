"""The inspector over runs of several envs: each rollout's env, the env filter, the run's suite
(one row per env) and the compare page's per-env rows, through its JSON API (#33.2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from benchmax.envs import Example, RolloutOutcome
from benchmax.inspector import create_app
from benchmax.store import GroupWrite, RunWriter


def _suite_run(path: Path, code_right: float) -> None:
    """Two math examples (``exact``), two code ones (``tests_passed``), two rollouts each."""
    writer = RunWriter.create(path, {"pass_threshold": 1.0, "model": "scripted"})
    ids = [("math", "math/1"), ("math", "math/2"), ("code", "code/1"), ("code", "code/2")]
    writer.sync_examples(
        "eval", [Example(example_id, {"prompt_messages": []}, env=env) for env, example_id in ids], resume=False
    )
    for index, (env, example_id) in enumerate(ids):
        name, value = ("exact", 1.0 - index) if env == "math" else ("tests_passed", code_right)
        outcomes = tuple(
            RolloutOutcome(
                rewards={name: value} if sample == 0 else {}, termination_reason="finished" if sample == 0
                else "model_error", rollout_id=f"eval/{example_id}#{sample}", example_id=example_id, split="eval",
            )
            for sample in range(2)
        )  # fmt: skip
        writer.write_group(GroupWrite(f"eval/{example_id}", example_id, index, 0, outcomes, (0, 1)))
    writer.fill_batch(0)
    writer.close()


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    _suite_run(tmp_path / "runs" / "a", 0.0)
    _suite_run(tmp_path / "runs" / "b", 1.0)
    return TestClient(create_app(tmp_path / "runs"), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))


def test_every_rollout_row_and_page_names_its_env(client: TestClient) -> None:
    rows = client.get("/api/runs/a/rollouts", params={"limit": 50}).json()["rows"]
    assert {row["rollout_id"]: row["env"] for row in rows} == {
        f"eval/{example_id}#{sample}": example_id.split("/")[0]
        for example_id in ("math/1", "math/2", "code/1", "code/2") for sample in (0, 1)
    }  # fmt: skip
    page = client.get("/api/runs/a/rollouts/eval/code/1#0".replace("#", "%23")).json()
    assert page["env"] == "code"


def test_the_rollout_table_filters_by_env(client: TestClient) -> None:
    code = client.get("/api/runs/a/rollouts", params={"env": "code"}).json()
    assert code["total"] == 4 and {row["env"] for row in code["rows"]} == {"code"}
    assert client.get("/api/runs/a/rollouts", params={"env": "nothing"}).json()["total"] == 0


def test_the_run_page_has_one_suite_row_per_env(client: TestClient) -> None:
    suite = {row["env"]: row for row in client.get("/api/runs/a/overview").json()["suite"]}
    assert set(suite) == {"code", "math"}
    assert (suite["math"]["rollouts"], suite["math"]["failed"], suite["math"]["passed"]) == (4, 2, 1)
    assert suite["math"]["components"] == {"exact": 0.25}  # (1 + 0 + 0 + 0) / 4, its own rollouts only
    assert suite["code"]["components"] == {"tests_passed": 0.0}


def test_the_compare_page_has_per_env_rows(client: TestClient) -> None:
    compared = client.get("/api/compare", params={"a": "a", "b": "b"}).json()
    rows = {row["env"]: row for row in compared["suite"]}
    assert rows["code"]["a"]["components"] == {"tests_passed": 0.0}
    assert rows["code"]["b"]["components"] == {"tests_passed": 0.5}
    assert rows["code"]["b"]["pass_rate"] - rows["code"]["a"]["pass_rate"] == pytest.approx(0.5)
    assert rows["math"]["a"]["components"] == rows["math"]["b"]["components"] == {"exact": 0.25}
