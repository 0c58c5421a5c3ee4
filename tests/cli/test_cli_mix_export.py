"""A mixture run end to end through the CLI: ``benchmax eval A B`` prints the suite table, ``benchmax
export`` (JSON Lines and Parquet) gives every row its env, and ``benchmax inspect --export`` carries
the suite and each rollout's env; no component is ever filled into another env's rollouts."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
from runkit import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import row, write_env


def _cells(text: str) -> list[list[str]]:
    lines = [line.replace("┃", "│") for line in text.splitlines()]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.count("│") >= 3]


def _boot(page: Path) -> dict:
    found = re.search(r'<script type="application/json" id="bmx-boot">(.*?)</script>', page.read_text(), re.S)
    assert found, page
    return json.loads(found.group(1))


def test_eval_of_two_envs_exports_and_inspects_with_each_rollouts_env_and_no_fill_across_envs(tmp_path, server):
    a = write_env(tmp_path / "envs", "a", rows=2, component="exact")
    b = write_env(tmp_path / "envs", "b", rows=2, component="tests_passed")
    wrong = row("b1", "b question 1")  # b's second example answered wrong: b's pass rate is 1/2
    wrong["prompt_messages"][0]["content"] = wrong["prompt_messages"][0]["content"].replace('["b1"]', '["nope"]')
    lines = (b / "eval.jsonl").read_text().splitlines()
    (b / "eval.jsonl").write_text(lines[0] + "\n" + json.dumps(wrong) + "\n")
    run_dir = tmp_path / "run"

    done = run_cli(
        "eval", a, b, "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_dir, "--no-progress"
    )

    assert done.returncode == 0, done.stdout
    assert "per env (components after zero-fill, within each env)" in done.stdout
    cells = _cells(done.stdout)
    header = next(line for line in cells if line[:4] == ["env", "rollouts", "failed", "pass rate"])
    assert header[4:] == ["exact", "tests_passed"]
    assert ["a", "2", "0", "100.0%", "1.0000", "-"] in cells
    assert ["b", "2", "0", "50.0%", "-", "0.5000"] in cells

    expected = {"a": {"exact"}, "b": {"tests_passed"}}
    for fmt in ("jsonl", "parquet"):
        exported = run_cli("export", run_dir, "--format", fmt, "--output", tmp_path / f"rollouts.{fmt}")
        assert exported.returncode == 0, exported.stdout
        if fmt == "jsonl":
            rows = [orjson.loads(line) for line in (tmp_path / "rollouts.jsonl").read_bytes().splitlines()]
        else:
            rows = pq.read_table(tmp_path / "rollouts.parquet").to_pylist()
        assert len(rows) == 4
        for item in rows:
            assert item["env"] in expected, item
            if fmt == "jsonl":
                rewards = item["rewards"]
            else:  # components are columns, null where a rollout has none
                rewards = {key[len("reward.") :]: value for key, value in item.items() if key.startswith("reward.")}
            present = {name for name, value in rewards.items() if value is not None}
            assert present == expected[item["env"]], (fmt, item["env"], rewards)
            assert set(item["filled"] or ()) <= expected[item["env"]], (fmt, item)
        assert sorted(item["env"] for item in rows) == ["a", "a", "b", "b"]

    inspected = run_cli("inspect", run_dir, "--export", tmp_path / "site")
    assert inspected.returncode == 0, inspected.stdout
    (page,) = (tmp_path / "site" / "runs").glob("*/index.html")
    data = _boot(page)["data"]
    suite = {item["env"]: item for item in data["overview"]["suite"]}
    assert sorted(suite) == ["a", "b"]
    assert set(suite["a"]["components"]) == {"exact"} and set(suite["b"]["components"]) == {"tests_passed"}
    assert sorted(item["env"] for item in data["rollouts"]) == ["a", "a", "b", "b"]
    for rollout_page in page.parent.glob("rollouts/*.html"):
        record = _boot(rollout_page)["data"]
        assert record["several_envs"] is True
        assert set(record["rewards"]) == expected[record["env"]], record["rewards"]
