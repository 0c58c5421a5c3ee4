"""Resume after a real crash or stop: whole groups only, nothing run twice, exact final counts.

``benchmax eval`` runs in a subprocess against a scripted server in this
process; each reply sleeps a little so the run is mid-way when it is stopped.
"""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

import pytest
from runkit import ENV_SPEC, cli_env, events, row, run_cli, start_cli, write_split

from benchmax import open_run
from benchmax.envs import canonical_example_id

EXAMPLES = 12
GROUP = 2


@pytest.fixture
def dataset(tmp_path: Path) -> list[dict]:
    # Sibling 0 (seed 0) answers right and sibling 1 wrong, so rewards are known per rollout id.
    rows = [
        row(f"a{index}", f"question {index}", answers=[f"a{index}", "wrong"], sleep=0.1) for index in range(EXAMPLES)
    ]
    write_split(tmp_path / "data", rows)
    return rows


def _expected_ids(rows: list[dict]) -> set[str]:
    return {f"eval/{canonical_example_id(item)}#{sample}" for item in rows for sample in range(GROUP)}


def _stored_groups(run_dir: Path) -> int:
    db = run_dir / "run.sqlite"
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT COUNT(*) FROM groups").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def _wait_for_groups(run_dir: Path, count: int, proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _stored_groups(run_dir) < count:
        assert proc.poll() is None, f"benchmax eval ended early:\n{proc.communicate()[0]}"
        assert time.monotonic() < deadline, f"fewer than {count} groups stored after {timeout}s"
        time.sleep(0.01)


def _snapshot(run_dir: Path) -> dict[str, tuple]:
    with open_run(run_dir) as run:
        return {
            row_[0]: row_[1:]
            for row_ in run.sql("SELECT rollout_id, seq, group_id, started_at, ended_at FROM rollouts")
        }


def _peak_open_contexts(trace_dir: Path, *, skip: int) -> int:
    open_now = peak = 0
    for line in (trace_dir / "events.log").read_text().splitlines()[skip:]:
        open_now += {"enter": 1, "exit": -1}.get(line.split(" ", 1)[0], 0)
        peak = max(peak, open_now)
    return peak


def _start(tmp_path: Path, server, *extra: str):
    return start_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url, "--model", "scripted",
        "--group-size", GROUP, "--concurrency", GROUP, "--seed", "0", "--run-dir", tmp_path / "run",
        "--env-arg", f'trace_dir="{tmp_path / "trace"}"', *extra,
    )  # fmt: skip


def _check_complete(run_dir: Path, rows: list[dict]) -> None:
    """The run equals an uninterrupted one: every id once, whole groups, known rewards."""
    with open_run(run_dir) as run:
        records = list(run.rollouts())
        assert run.meta["status"] == "completed"
        (groups,) = run.sql("SELECT COUNT(*) FROM groups")[0]
        per_group = run.sql("SELECT group_id, COUNT(*), SUM(sample_index) FROM rollouts GROUP BY group_id")
        seqs = run.sql("SELECT COUNT(DISTINCT seq) FROM rollouts")[0][0]
        stats = run.stats()
    ids = [record.rollout_id for record in records]
    assert len(ids) == EXAMPLES * GROUP == len(set(ids)) == seqs
    assert set(ids) == _expected_ids(rows)
    assert groups == EXAMPLES
    assert all(count == GROUP and indices == 1 for _, count, indices in per_group)
    assert {record.rollout_id: record.rewards for record in records} == {
        rollout: {"correct": 1.0 if rollout.endswith("#0") else 0.0} for rollout in ids
    }
    assert (stats.rollouts, stats.groups, stats.passed, stats.groups_no_signal) == (24, 12, 12, 0)


def test_resume_after_kill_9_runs_only_the_missing_groups_and_ends_with_exact_ids(tmp_path, server, dataset):
    proc = _start(tmp_path, server)
    _wait_for_groups(tmp_path / "run", 3, proc)
    proc.kill()
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.3)  # let the server take any request the dead process had already sent
    before = _snapshot(tmp_path / "run")
    stored_groups = {group for _, group, _, _ in before.values()}
    assert 3 <= len(stored_groups) < EXAMPLES, "the kill must land mid-run"
    assert len(before) == GROUP * len(stored_groups), "a crash leaves whole groups only"
    requests_before = len(server.requests)
    trace_lines = len((tmp_path / "trace" / "events.log").read_text().splitlines())

    resumed = run_cli("eval", "--resume", tmp_path / "run", "--no-progress")

    assert resumed.returncode == 0, resumed.stdout
    _check_complete(tmp_path / "run", dataset)
    after = _snapshot(tmp_path / "run")
    assert {rollout: after[rollout] for rollout in before} == before, "stored groups were run again"
    new_prompts = [body["messages"][0]["content"] for body in server.requests[requests_before:]]
    missing = [item for item in dataset if f"eval/{canonical_example_id(item)}" not in stored_groups]
    assert _peak_open_contexts(tmp_path / "trace", skip=trace_lines) == GROUP, "resume keeps the stored --concurrency"
    assert sorted(new_prompts) == sorted(
        item["prompt_messages"][0]["content"] for item in missing for _ in range(GROUP)
    )


@pytest.mark.parametrize(
    ("signum", "exit_code", "message"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped")],
    ids=["sigint", "sigterm"],
)
def test_a_stop_signal_exits_cleanly_says_how_to_resume_and_the_resume_completes(
    tmp_path, server, dataset, signum, exit_code, message
):
    run_dir = tmp_path / "run"
    proc = _start(tmp_path, server)
    _wait_for_groups(run_dir, 2, proc)
    proc.send_signal(signum)
    output, _ = proc.communicate(timeout=30)

    assert proc.returncode == exit_code, output
    assert message in output
    assert f"benchmax eval --resume {run_dir}" in output
    counted = events(tmp_path / "trace")
    assert counted["enter"] == counted["exit"] > 0, "every rollout context entered was exited"
    assert counted["aclose"] == 1
    with open_run(run_dir) as run:
        assert run.meta["status"] == "interrupted"
        stored = len(run)
        per_group = {count for _, count in run.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
    assert 2 * GROUP <= stored < EXAMPLES * GROUP and per_group == {GROUP}

    resumed = run_cli("eval", "--resume", run_dir, env=cli_env())

    assert resumed.returncode == 0, resumed.stdout
    assert f"resuming: {stored} of {EXAMPLES * GROUP} rollouts already stored" in resumed.stdout
    _check_complete(run_dir, dataset)
    counted = events(tmp_path / "trace")
    assert counted["enter"] == counted["exit"] and counted["aclose"] == 2


def test_resuming_a_completed_run_calls_no_model_and_changes_nothing(tmp_path, server, dataset):
    first = _start(tmp_path, server)
    output, _ = first.communicate(timeout=60)
    assert first.returncode == 0, output
    before = _snapshot(tmp_path / "run")
    requests = server.counts["requests"]

    again = run_cli("eval", "--resume", tmp_path / "run", "--no-progress")

    assert again.returncode == 0, again.stdout
    assert server.counts["requests"] == requests == EXAMPLES * GROUP
    assert _snapshot(tmp_path / "run") == before
    _check_complete(tmp_path / "run", dataset)
