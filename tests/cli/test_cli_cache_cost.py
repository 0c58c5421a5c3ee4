"""``benchmax eval --cache`` and the run's cost, in real subprocesses against two scripted servers.

The env (``tests/runner/support/judged_env.py``) makes two policy turns per
rollout (a tool call, then the answer) and one LLM-judge call in its reward, so
every figure below has a policy part and a judge part. The scripted usage makes
the prices easy to check by hand: with the price file of :func:`_prices`

* a policy rollout is 1000 prompt tokens (400 of them cached by the server) + 10
  completion, then 1200 prompt + 2 completion:
  (600 * 1 + 400 * 0.5 + 10 * 2) + (1200 * 1 + 2 * 2) = 2024 micro-dollars;
* a judge call is 100 prompt + 5 completion at 10 / 20: 1100 micro-dollars.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from runkit import SUPPORT, cli_env, run_cli, start_cli

from benchmax.client import CACHE_FILE
from benchmax.store import DB_NAME, RunQueries
from benchmax.testing import ScriptedServer

JUDGED_ENV = f"{SUPPORT / 'judged_env.py'}:JudgedEnv"
SECRET = "sk-cache-test-0ddba11-never-stored"
POLICY_ROLLOUT_USD = 2024e-6
JUDGE_CALL_USD = 1100e-6
WORDS = [("apple", "5"), ("kiwi", "4"), ("banana", "6"), ("fig", "3")]


def _rows(words: list[tuple[str, str]]) -> list[dict]:
    rows = []
    for word, answer in words:
        script = [
            {
                "tool_calls": [{"name": "lookup", "arguments": {"word": word}}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 400},
            },
            {"content": answer, "usage": {"prompt_tokens": 1200, "completion_tokens": 2}},
        ]
        prompt = f"How long is {word}?\n#script: {json.dumps(script)}"
        rows.append({"prompt_messages": [{"role": "user", "content": prompt}], "answer": answer})
    return rows


def _judge_policy(body: dict) -> dict:
    return {"content": '{"score": 1}', "usage": {"prompt_tokens": 100, "completion_tokens": 5}}


@pytest.fixture
def policy() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def judge() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy=_judge_policy) as running:
        yield running


@pytest.fixture
def data(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows(WORDS[:2])))
    return directory


def _prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(
        '[models."scripted"]\nprompt = 1.0\ncached_prompt = 0.5\ncompletion = 2.0\n'
        '[models."judge"]\nprompt = 10.0\ncompletion = 20.0\n'
    )
    return path


def _eval(tmp_path, policy, judge, data, run: str, *extra: str | Path, env: dict[str, str] | None = None):
    return run_cli(
        "eval", JUDGED_ENV, "--env-arg", f"judge_url={json.dumps(judge.base_url)}", "--data-dir", data,
        "--base-url", policy.base_url, "--model", "scripted", "--seed", "1", "--no-progress",
        "--prices", _prices(tmp_path), "--run-dir", tmp_path / run, *extra, env=env,
    )  # fmt: skip


def _cell(output: str, first: str) -> str:
    """The second cell of the summary row whose first cell is ``first``."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            return cells[1]
    raise AssertionError(f"no table row {first!r} in:\n{output}")


def _rows_of(output: str) -> set[str]:
    return {cells[0] for line in output.splitlines() if (cells := [c.strip() for c in line.split("│")[1:-1]])}


def _select(run_dir: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"{(run_dir / DB_NAME).as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _rollout_costs(run_dir: Path) -> list[dict]:
    """Each rollout's cost as the store's read model (the inspector's rollout page) gives it."""
    queries = RunQueries(run_dir)
    try:
        ids = [row[0] for row in _select(run_dir, "SELECT rollout_id FROM rollouts ORDER BY seq")]
        return [queries.rollout(rollout_id)["cost"] for rollout_id in ids]
    finally:
        queries.close()


def test_a_second_identical_eval_is_answered_by_the_cache_without_one_model_request(tmp_path, policy, judge, data):
    cache = tmp_path / "cache"
    first = _eval(tmp_path, policy, judge, data, "run1", "--cache", cache)
    assert first.returncode == 0, first.stdout
    assert (policy.counts["requests"], judge.counts["requests"]) == (4, 2)
    assert _cell(first.stdout, "model calls") == "policy 4 sent + 0 from the cache; judge 2 sent + 0 from the cache"
    assert _cell(first.stdout, "response cache") == "0 hits, 6 misses"
    assert _cell(first.stdout, "cost") == "$0.006248 (policy $0.004048, judge $0.0022)"

    second = _eval(tmp_path, policy, judge, data, "run2", "--cache", cache)

    assert second.returncode == 0, second.stdout
    assert (policy.counts["requests"], judge.counts["requests"]) == (4, 2), "no request reached either server"
    assert _cell(second.stdout, "model calls") == "policy 0 sent + 4 from the cache; judge 0 sent + 2 from the cache"
    assert _cell(second.stdout, "response cache") == "6 hits, 0 misses"
    assert _cell(second.stdout, "cost") == "$0 (policy $0, judge $0)"
    # The replayed rollouts are the same rollouts: same transcripts, same rewards.
    assert _cell(second.stdout, "tokens prompt / completion") == _cell(first.stdout, "tokens prompt / completion")
    for run in ("run1", "run2"):
        stored = _select(tmp_path / run, "SELECT final_text, reward FROM rollouts ORDER BY final_text")
        assert stored == [("4", 2.0), ("5", 2.0)]


def test_without_cache_every_eval_asks_the_model_and_the_summary_has_no_cache_row(tmp_path, policy, judge, data):
    for run in ("run1", "run2"):
        result = _eval(tmp_path, policy, judge, data, run)
        assert result.returncode == 0, result.stdout
        assert "response cache" not in _rows_of(result.stdout)
        assert _cell(result.stdout, "model calls") == "policy 4 sent; judge 2 sent"
    assert (policy.counts["requests"], judge.counts["requests"]) == (8, 4)
    off = _eval(tmp_path, policy, judge, data, "run3", "--cache", "off")
    assert off.returncode == 0, off.stdout
    assert policy.counts["requests"] == 12 and not (tmp_path / "off").exists()


def test_each_rollout_and_the_run_keep_their_cost_with_the_judge_apart_from_the_policy(tmp_path, policy, judge, data):
    result = _eval(tmp_path, policy, judge, data, "run")
    assert result.returncode == 0, result.stdout
    assert _cell(result.stdout, "judge tokens prompt / completion") == "200 / 10"
    assert _cell(result.stdout, "prompt tokens the server cached") == "800"

    for cost in _rollout_costs(tmp_path / "run"):
        assert cost["usd"] == pytest.approx(POLICY_ROLLOUT_USD + JUDGE_CALL_USD)
        assert (cost["requests"], cost["cache_hits"]) == (3, 0)
        by_role = {call["role"]: call for call in cost["calls"]}
        assert by_role["policy"]["model"] == "scripted" and by_role["judge"]["model"] == "judge"
        assert by_role["policy"]["usd"] == pytest.approx(POLICY_ROLLOUT_USD)
        assert (by_role["policy"]["prompt_tokens"], by_role["policy"]["cached_tokens"]) == (2200, 400)
        assert by_role["judge"]["usd"] == pytest.approx(JUDGE_CALL_USD)
        assert by_role["judge"]["requests"] == 1
    queries = RunQueries(tmp_path / "run")
    try:
        stored = queries.meta()["cost"]
    finally:
        queries.close()
    assert stored["usd"] == pytest.approx(2 * (POLICY_ROLLOUT_USD + JUDGE_CALL_USD))
    assert stored["unpriced"] == []
    assert stored["prices"]["models"] == {
        "judge": {"prompt": 10.0, "completion": 20.0},
        "scripted": {"prompt": 1.0, "completion": 2.0, "cached_prompt": 0.5},
    }
    assert {(call["role"], call["requests"]) for call in stored["calls"]} == {("policy", 4), ("judge", 2)}


def test_a_model_without_a_price_has_an_unknown_cost_never_zero(tmp_path, policy, judge, data):
    prices = tmp_path / "only-policy.toml"
    prices.write_text('[models."scripted"]\nprompt = 1.0\ncompletion = 2.0\n')

    result = _eval(tmp_path, policy, judge, data, "run", "--prices", prices)

    assert result.returncode == 0, result.stdout
    assert _cell(result.stdout, "cost").startswith("unknown: no price for judge (add one with --prices FILE); $0.0")
    assert all(cost["usd"] is None for cost in _rollout_costs(tmp_path / "run"))


def test_max_cost_stops_the_run_resumably_and_a_resume_with_more_finishes_it_without_paying_twice(
    tmp_path, policy, judge, data
):
    (data / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows(WORDS)))
    one_rollout = POLICY_ROLLOUT_USD + JUDGE_CALL_USD  # $0.003124
    # The budget is reached inside the second rollout's group; that group finishes (its calls are
    # paid for) and is stored, and no further group starts.
    stopped = _eval(tmp_path, policy, judge, data, "run", "--max-cost", "0.005", "--concurrency", "1")

    assert stopped.returncode == 1, stopped.stdout
    out = stopped.stdout
    assert "error: the run stopped: the run spent $0.0062 on model calls, reaching --max-cost $0.005" in out
    assert "every started group finished and stored" in out
    assert f"benchmax eval --resume {tmp_path / 'run'} --max-cost 0.01" in out
    assert (policy.counts["requests"], judge.counts["requests"]) == (4, 2)
    assert _select(tmp_path / "run", "SELECT COUNT(*) FROM rollouts") == [(2,)]
    queries = RunQueries(tmp_path / "run")
    try:
        meta = queries.meta()
    finally:
        queries.close()
    assert meta["cost"]["usd"] == pytest.approx(2 * one_rollout)
    assert meta["status"] == "failed" and "--max-cost" in meta["error"]

    resumed = run_cli("eval", "--resume", tmp_path / "run", "--max-cost", "0.05", "--no-progress")

    assert resumed.returncode == 0, resumed.stdout
    assert (policy.counts["requests"], judge.counts["requests"]) == (8, 4), "only the two groups left were run"
    assert _cell(resumed.stdout, "rollouts") == "4 (4 scored, 0 failed)"
    assert _cell(resumed.stdout, "cost").startswith("$0.012496 ")  # all sessions: 4 * $0.003124


def test_a_resumed_run_past_its_budget_stops_before_any_model_call(tmp_path, policy, judge, data):
    (data / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows(WORDS)))
    first = _eval(tmp_path, policy, judge, data, "run", "--max-cost", "0.001", "--concurrency", "1")
    assert first.returncode == 1, first.stdout
    sent = (policy.counts["requests"], judge.counts["requests"])

    again = run_cli("eval", "--resume", tmp_path / "run", "--no-progress")  # the stored --max-cost holds

    assert again.returncode == 1, again.stdout
    assert "reaching --max-cost $0.001" in again.stdout
    assert (policy.counts["requests"], judge.counts["requests"]) == sent


def test_max_cost_needs_a_price_for_the_model_and_says_so_before_any_rollout(tmp_path, policy, judge, data):
    result = run_cli(
        "eval", JUDGED_ENV, "--env-arg", f"judge_url={json.dumps(judge.base_url)}", "--data-dir", data,
        "--base-url", policy.base_url, "--model", "scripted", "--max-cost", "1", "--no-progress",
        "--run-dir", tmp_path / "run",
    )  # fmt: skip

    assert result.returncode == 2, result.stdout
    assert "--max-cost needs the price of the model 'scripted'" in result.stdout
    assert "--prices FILE" in result.stdout
    assert policy.counts["requests"] == 0 and judge.counts["requests"] == 0
    bad = run_cli("eval", JUDGED_ENV, "--max-cost", "0", "--run-dir", tmp_path / "other")
    assert bad.returncode == 2 and "give US dollars above 0" in bad.stdout


def test_the_api_key_is_neither_in_the_cache_nor_in_its_keys(tmp_path, policy, judge, data):
    cache = tmp_path / "cache"
    first = _eval(
        tmp_path, policy, judge, data, "run1", "--cache", cache, "--api-key-env", "CACHE_TEST_KEY",
        env=cli_env(CACHE_TEST_KEY=SECRET),
    )  # fmt: skip
    assert first.returncode == 0, first.stdout
    assert policy.headers[-1].get("Authorization") == f"Bearer {SECRET}", "the key was sent"
    for path in cache.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path

    # Another key: the same requests, so the same keys and every reply from the cache.
    second = _eval(
        tmp_path, policy, judge, data, "run2", "--cache", cache, "--api-key-env", "CACHE_TEST_KEY",
        env=cli_env(CACHE_TEST_KEY="sk-another-key"),
    )  # fmt: skip
    assert second.returncode == 0, second.stdout
    assert _cell(second.stdout, "response cache") == "6 hits, 0 misses"


def test_two_evals_writing_one_cache_at_once_both_finish_and_leave_it_sound(tmp_path, policy, judge):
    for name, words in (("a", WORDS[:2]), ("b", WORDS[1:])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows(words)))
    cache = tmp_path / "cache"
    common = [
        "eval", JUDGED_ENV, "--env-arg", f"judge_url={json.dumps(judge.base_url)}", "--base-url", policy.base_url,
        "--model", "scripted", "--seed", "1", "--no-progress", "--prices", _prices(tmp_path), "--cache", cache,
    ]  # fmt: skip
    processes = [
        start_cli(*common, "--data-dir", tmp_path / name, "--run-dir", tmp_path / f"run-{name}") for name in "ab"
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs

    conn = sqlite3.connect(cache / CACHE_FILE)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        entries, size = conn.execute("SELECT COUNT(*), SUM(size) FROM responses").fetchone()
        recorded = int(conn.execute("SELECT value FROM info WHERE name = 'bytes'").fetchone()[0])
    finally:
        conn.close()
    # kiwi's requests are in both datasets: whoever asked second may have found them stored or
    # sent them too; either way one entry each, and the size accounting adds up.
    assert entries == 4 * 3 and recorded == size
    replay = run_cli(*common, "--data-dir", tmp_path / "b", "--run-dir", tmp_path / "run-b2")
    assert _cell(replay.stdout, "response cache") == "9 hits, 0 misses"


def test_a_cache_file_that_is_not_a_cache_is_refused_before_any_request(tmp_path, policy, judge, data):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / CACHE_FILE).write_bytes(b"not a database at all " * 200)

    result = _eval(tmp_path, policy, judge, data, "run", "--cache", cache)

    assert result.returncode == 2, result.stdout
    assert f"{cache / CACHE_FILE} is not a benchmax response cache" in result.stdout
    assert "delete it or give another --cache directory" in result.stdout
    assert policy.counts["requests"] == 0 and not (tmp_path / "run").exists()
    on_a_file = _eval(tmp_path, policy, judge, data, "run", "--cache", cache / CACHE_FILE)
    assert on_a_file.returncode == 2 and "give a directory for the cache" in on_a_file.stdout


def test_a_damaged_entry_is_a_warning_and_a_miss_never_a_wrong_answer(tmp_path, policy, judge, data):
    cache = tmp_path / "cache"
    assert _eval(tmp_path, policy, judge, data, "run1", "--cache", cache).returncode == 0
    conn = sqlite3.connect(cache / CACHE_FILE)
    try:
        conn.execute("UPDATE responses SET value = X'789c0bcecfcf'")
        conn.commit()
    finally:
        conn.close()

    result = _eval(tmp_path, policy, judge, data, "run2", "--cache", cache)

    assert result.returncode == 0, result.stdout
    assert "the response cache" in result.stdout and "failed to read" in result.stdout
    assert _cell(result.stdout, "response cache") == "0 hits, 6 misses"
    assert (policy.counts["requests"], judge.counts["requests"]) == (8, 4), "every reply came from the model again"
    assert _cell(result.stdout, "pass rate (reward >= 1)") == "100.0% (2/2)"


def test_train_refuses_the_cache_because_a_cached_reply_is_an_old_policys(tmp_path):
    result = run_cli("train", JUDGED_ENV, "--cache", tmp_path / "cache")

    assert result.returncode == 2, result.stdout
    assert "benchmax train never answers from a response cache" in result.stdout
    assert not (tmp_path / "cache").exists()


def test_rescore_with_the_evals_cache_asks_no_model_and_keeps_its_own_cost_apart(tmp_path, policy, judge, data):
    cache = tmp_path / "cache"
    assert _eval(tmp_path, policy, judge, data, "run", "--cache", cache).returncode == 0
    sent = (policy.counts["requests"], judge.counts["requests"])

    cached = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "rescored", "--cache", cache,
                     "--prices", _prices(tmp_path))  # fmt: skip

    assert cached.returncode == 0, cached.stdout
    assert (policy.counts["requests"], judge.counts["requests"]) == sent, "the judge's replies came from the cache"
    assert _cell(cached.stdout, "model calls") == "judge 0 sent + 2 from the cache"
    assert _cell(cached.stdout, "cost") == "$0"
    queries = RunQueries(tmp_path / "rescored")
    try:
        meta = queries.meta()
    finally:
        queries.close()
    assert meta["source_cost"]["usd"] == pytest.approx(2 * (POLICY_ROLLOUT_USD + JUDGE_CALL_USD))
    assert meta["cost"]["usd"] == 0

    uncached = run_cli("rescore", tmp_path / "run", "--run-dir", tmp_path / "again", "--prices", _prices(tmp_path))

    assert uncached.returncode == 0, uncached.stdout
    assert judge.counts["requests"] == sent[1] + 2 and policy.counts["requests"] == sent[0]
    assert _cell(uncached.stdout, "model calls") == "judge 2 sent"
    assert _cell(uncached.stdout, "cost") == "$0.0022"


def test_a_judge_without_a_price_stops_a_budgeted_run_at_its_first_call(tmp_path, policy, judge, data):
    prices = tmp_path / "only-policy.toml"
    prices.write_text('[models."scripted"]\nprompt = 1.0\ncompletion = 2.0\n')

    result = _eval(tmp_path, policy, judge, data, "run", "--prices", prices, "--max-cost", "1", "--concurrency", "1")

    assert result.returncode == 1, result.stdout
    assert "the judge model 'judge' has no price in the price table, so --max-cost $1 cannot be kept" in result.stdout
    assert judge.counts["requests"] == 1, "the group that made the call finished; no other started"
    assert _select(tmp_path / "run", "SELECT COUNT(*) FROM rollouts") == [(1,)]
