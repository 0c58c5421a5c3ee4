"""Contexts are exited on every way out, and a served env that dies stops the run cleanly.

All real processes on loopback: ``benchmax serve`` and ``benchmax eval`` run as
subprocesses and are killed mid-run; the served env writes every context enter
and exit to a trace file, which the tests count.
"""

from __future__ import annotations

import json
import signal
import urllib.request

from runkit import run_cli, start_cli
from serve_support import events, scripted, wait_until

from benchmax.envs import canonical_example_id
from benchmax.store import open_run

GROUP = 2


def _groups(run_dir):
    if not (run_dir / "run.sqlite").exists():
        return 0
    try:
        with open_run(run_dir) as run:
            return run.sql("SELECT COUNT(*) FROM groups")[0][0]
    except Exception:
        return 0


def test_a_served_env_killed_mid_run_stops_the_eval_with_whole_groups_stored_and_resume_finishes_it(
    tmp_path, model, serve_env
):
    rows = [scripted(f"q{i}", [{"sleep": 0.2, "content": f"a{i}"}], f"a{i}") for i in range(20)]
    server = serve_env(rows)
    run_dir = tmp_path / "run"
    args = ["--base-url", model.base_url, "--group-size", str(GROUP), "--concurrency", "4", "--no-progress"]
    proc = start_cli("eval", server.url, "--run-dir", run_dir, *args)
    wait_until("3 groups stored", lambda: _groups(run_dir) >= 3, proc=proc)
    server.stop(signal.SIGKILL)
    output, _ = proc.communicate(timeout=120)
    out = " ".join(output.split())
    assert proc.returncode == 1, output
    assert f"the run stopped: the env server at {server.url} stopped answering" in out
    assert f"Resume it once the env server is back: benchmax eval --resume {run_dir}" in out
    with open_run(run_dir) as run:
        assert run.meta["status"] == "failed"
        stored = [record.termination_reason for record in run.rollouts()]
        per_group = {count for _, count in run.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
    assert set(stored) == {"finished"} and 3 * GROUP <= len(stored) < len(rows) * GROUP, stored
    assert per_group == {GROUP}, "only whole groups are stored, none the dead server touched"

    server.start()  # the same port, as a supervisor restarts it
    resumed = run_cli("eval", "--resume", run_dir, "--no-progress", timeout=120)
    assert resumed.returncode == 0, resumed.stdout
    with open_run(run_dir) as run:
        ids = [record.rollout_id for record in run.rollouts()]
        assert run.meta["status"] == "completed"
        assert {record.termination_reason for record in run.rollouts()} == {"finished"}
    expected = {f"eval/{canonical_example_id(row)}#{sample}" for row in rows for sample in range(GROUP)}
    assert len(ids) == len(set(ids)) and set(ids) == expected


def test_a_client_killed_mid_session_has_its_contexts_exited_once_its_sessions_idle_past_the_ttl(
    tmp_path, model, serve_env
):
    rows = [scripted(f"q{i}", [{"sleep": 120, "content": "late"}], "late") for i in range(3)]
    server = serve_env(rows, "--session-ttl", "1")
    proc = start_cli("eval", server.url, "--base-url", model.base_url, "--run-dir", tmp_path / "run", "--no-progress")
    wait_until("every rollout inside its context", lambda: events(server.trace)["enter"] == 3, proc=proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert events(server.trace)["exit"] == 0, "the sessions are still open while their client could come back"
    wait_until("every context exited", lambda: events(server.trace)["exit"] == 3, timeout=60)
    server.stop()
    assert server.output.count("idle for more than 1s (its client went away); tearing it down") == 3, server.output


def test_stopping_the_server_exits_every_open_context_and_closes_the_env(tmp_path, serve_env):
    rows = [scripted(f"q{i}", [{"content": "x"}], "x") for i in range(2)]
    server = serve_env(rows)
    for index in range(2):
        body = json.dumps({"split": "eval", "index": index, "rollout_id": f"held-{index}"}).encode()
        request = urllib.request.Request(
            f"{server.url}/sessions",
            data=body,
            headers={"Content-Type": "application/json", **server.headers},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())["rollout_id"] == f"held-{index}"
    assert events(server.trace) == {"enter": 2}
    server.stop(signal.SIGTERM)
    assert events(server.trace) == {"enter": 2, "exit": 2, "aclose": 1}
    assert "tearing down 2 open session(s)" in server.output
