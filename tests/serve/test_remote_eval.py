"""``benchmax eval http://HOST:PORT`` against ``benchmax serve ENV`` stores what ``benchmax eval ENV`` stores.

Both runs are real ``benchmax eval`` processes against one scripted model
server; the env is served by a real ``benchmax serve`` process. The records are
compared rollout by rollout: ids, rewards, termination reasons, errors,
transcripts, turns, and the log records the env code emitted (with their phase
and turn), which the remote run gets forwarded from the server.
"""

from __future__ import annotations

from pathlib import Path

from runkit import run_cli
from serve_support import ENV_SPEC, events, mixed_rows, scripted, write_rows

from benchmax.store import open_run

GROUP = 2


def _records(run_dir: Path) -> dict[str, dict[str, object]]:
    with open_run(run_dir) as run:
        found = {}
        for record in run.rollouts():
            logs = [
                (entry.logger, entry.level, entry.message, entry.phase, entry.turn)
                for entry in run.logs(rollout_id=record.rollout_id)
            ]
            found[record.rollout_id] = {
                "example_id": record.example_id,
                "rewards": record.rewards,
                "reason": record.termination_reason,
                "error": record.error,
                "messages": record.messages,
                "turns": [(t.index, t.tool_calls, t.tool_errors, t.finish_reason) for t in record.turns],
                "env_logs": [entry for entry in logs if entry[0] == "served_env"],
                "logs": logs,
            }
        return found


def test_a_remote_run_stores_the_same_records_as_a_local_run_of_the_same_env(tmp_path, model, serve_env):
    rows = mixed_rows()
    data = write_rows(tmp_path / "data", rows)
    server = serve_env(rows)
    common = ["--base-url", model.base_url, "--group-size", str(GROUP), "--no-progress", "--max-failure-rate", "1"]
    local = run_cli("eval", ENV_SPEC, "--data-dir", data, "--run-dir", tmp_path / "local", *common)
    remote = run_cli("eval", server.url, "--run-dir", tmp_path / "remote", *common)
    assert local.returncode == 0, local.stdout
    assert remote.returncode == 0, remote.stdout

    here, there = _records(tmp_path / "local"), _records(tmp_path / "remote")
    assert sorted(here) == sorted(there) and len(here) == len(rows) * GROUP
    for rollout_id, record in here.items():
        other = there[rollout_id]
        for key in ("example_id", "rewards", "reason", "error", "messages", "turns", "env_logs"):
            assert other[key] == record[key], (
                f"{rollout_id}: {key} differs\nlocal:  {record[key]}\nremote: {other[key]}"
            )
    reasons = {record["reason"] for record in there.values()}
    assert reasons == {"finished", "tool_error", "reward_error", "max_turns_exceeded"}
    lookup = next(record for record in there.values() if "lookup" in str(record["messages"][0]))
    assert lookup["messages"][2]["content"] == "error: no key 'e'" and lookup["reason"] == "finished"
    crashed = next(record for record in there.values() if record["reason"] == "tool_error")
    assert crashed["error"] == "tool 'explode' raised RuntimeError: the tool blew up"
    tool_crash_logs = [entry for entry in crashed["logs"] if entry[0] == "benchmax.tools"]
    assert tool_crash_logs == [("benchmax.tools", "ERROR", "tool 'explode' raised RuntimeError", "tools", 0)]
    group_logs = {}
    for name in ("local", "remote"):
        with open_run(tmp_path / name) as run:
            group_logs[name] = [entry.message for entry in run.logs() if entry.phase == "group_reward"]
    # every group with a scored sibling ran the group hook: all but the tool crash's and the reward crash's
    assert group_logs["remote"] == group_logs["local"] == [f"group of {GROUP} scored"] * (len(rows) - 2)
    counted = events(server.trace)
    assert counted["enter"] == counted["exit"] == len(rows) * GROUP


def test_a_session_outlives_a_model_turn_longer_than_its_ttl(tmp_path, model, serve_env):
    rows = [scripted("slow", [{"sleep": 2.5, "content": "ok"}], "ok")]
    server = serve_env(rows, "--session-ttl", "0.6")
    result = run_cli("eval", server.url, "--base-url", model.base_url, "--run-dir", tmp_path / "run", "--no-progress")
    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        (record,) = run.rollouts()
    assert record.termination_reason == "finished" and record.rewards == {"correct": 1.0, "first": 1.0}
    server.stop()
    assert "idle for more than" not in server.output, server.output
    assert events(server.trace)["exit"] == 1
