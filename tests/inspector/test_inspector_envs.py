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


def _one_env_run(path: Path) -> None:
    """A run of one env: its examples name none, its metadata names the env (``solo``)."""
    writer = RunWriter.create(path, {"pass_threshold": 1.0, "model": "scripted", "env_class": "solo"})
    writer.sync_examples("eval", [Example(f"solo/{index}", {"prompt_messages": []}) for index in (1, 2)], resume=False)
    for index in (1, 2):
        outcome = RolloutOutcome(
            rewards={"exact": 1.0}, termination_reason="finished", rollout_id=f"eval/solo/{index}#0",
            example_id=f"solo/{index}", split="eval",
        )  # fmt: skip
        writer.write_group(GroupWrite(f"eval/solo/{index}", f"solo/{index}", index - 1, 0, (outcome,), (0,)))
    writer.fill_batch(0)
    writer.close()


_ID = {"rollouts": "rollout_id", "examples": "example_id", "groups": "group_id"}
_MATH_FIRST = {  # each table's default order: the dataset's (math's examples come first)
    "rollouts": [f"eval/{e}#{s}" for e in ("math/1", "math/2", "code/1", "code/2") for s in (0, 1)],
    "examples": ["math/1", "math/2", "code/1", "code/2"],
    "groups": ["eval/math/1", "eval/math/2", "eval/code/1", "eval/code/2"],
}
_BY_ENV = {  # sorted by env (code < math), then in the table's own order
    "rollouts": [f"eval/{e}#{s}" for e in ("code/1", "code/2", "math/1", "math/2") for s in (0, 1)],
    "examples": ["code/1", "code/2", "math/1", "math/2"],
    "groups": ["eval/code/1", "eval/code/2", "eval/math/1", "eval/math/2"],
}


def _ids(client: TestClient, kind: str, **params: str) -> list[str]:
    answer = client.get(f"/api/runs/a/{kind}", params={"limit": "50", **params})
    assert answer.status_code == 200, answer.text
    return [row[_ID[kind]] for row in answer.json()["rows"]]


@pytest.mark.parametrize("kind", ["examples", "groups"])
def test_every_example_and_group_row_names_its_env(client: TestClient, kind: str) -> None:
    rows = client.get(f"/api/runs/a/{kind}").json()["rows"]
    assert {row["example_id"]: row["env"] for row in rows} == {
        "math/1": "math", "math/2": "math", "code/1": "code", "code/2": "code"
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["rollouts", "examples", "groups"])
def test_every_table_filters_by_env(client: TestClient, kind: str) -> None:
    code = client.get(f"/api/runs/a/{kind}", params={"env": "code"}).json()
    assert code["total"] == len(_MATH_FIRST[kind]) // 2
    assert [row[_ID[kind]] for row in code["rows"]] == [i for i in _MATH_FIRST[kind] if "code/" in i]
    assert {row["env"] for row in code["rows"]} == {"code"}
    assert client.get(f"/api/runs/a/{kind}", params={"env": "nothing"}).json()["total"] == 0


@pytest.mark.parametrize("kind", ["rollouts", "examples", "groups"])
def test_every_table_sorts_by_env_either_way(client: TestClient, kind: str) -> None:
    assert _ids(client, kind) == _MATH_FIRST[kind]
    assert _ids(client, kind, sort="env") == _BY_ENV[kind]
    assert _ids(client, kind, sort="env", desc="1") == _BY_ENV[kind][::-1]
    assert _ids(client, kind, sort="env", env="math") == [i for i in _BY_ENV[kind] if "math/" in i]
    paged = _ids(client, kind, sort="env", offset="1", limit="2")
    assert paged == _BY_ENV[kind][1:3]


@pytest.mark.parametrize("kind", ["rollouts", "examples", "groups"])
@pytest.mark.parametrize("key", ["nonsense", "env; DROP TABLE examples", "e.env", "ENV"])
def test_an_unknown_sort_key_is_ignored_as_before(client: TestClient, kind: str, key: str) -> None:
    assert _ids(client, kind, sort=key) == _MATH_FIRST[kind]
    assert _ids(client, kind) == _MATH_FIRST[kind]  # the file is untouched


@pytest.mark.parametrize("kind", ["rollouts", "examples", "groups"])
def test_a_run_of_one_env_names_its_own_env_and_filters_and_sorts_by_it(tmp_path: Path, kind: str) -> None:
    _one_env_run(tmp_path / "runs" / "one")
    client = TestClient(create_app(tmp_path / "runs"), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))
    rows = client.get(f"/api/runs/one/{kind}").json()["rows"]
    assert [row["env"] for row in rows] == ["solo", "solo"]
    assert client.get(f"/api/runs/one/{kind}", params={"env": "solo"}).json()["total"] == 2
    assert client.get(f"/api/runs/one/{kind}", params={"env": "math"}).json()["total"] == 0
    by_env = client.get(f"/api/runs/one/{kind}", params={"sort": "env", "desc": "1"}).json()["rows"]
    assert [row[_ID[kind]] for row in by_env] == [row[_ID[kind]] for row in rows][::-1]
