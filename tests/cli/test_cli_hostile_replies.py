"""``benchmax eval`` against a server whose one reply claims 2**64 - 1 prompt tokens.

Once, that number reached the store writer: the run exited 2 with no rollout
stored (finished groups included), its status stayed "running", and ``--resume``
failed the same way. Now the client refuses the reply, that rollout fails with
the field named, and the rest of the run is kept.
"""

from __future__ import annotations

from pathlib import Path

from runkit import ENV_SPEC, row, run_cli, write_split

from benchmax import open_run

HUGE = 18446744073709551615


def test_one_reply_with_a_huge_usage_fails_its_rollout_only_and_the_run_resumes(tmp_path: Path, server) -> None:
    rows = [row(f"a{index}", f"question {index}") for index in range(4)]
    huge = {"prompt_tokens": HUGE, "total_tokens": HUGE}
    rows[2] = row("a2", "question 2", script=[{"content": "a2", "usage": huge}])
    write_split(tmp_path / "data", rows)
    run_dir = tmp_path / "run"
    result = run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url, "--model", "scripted",
        "--run-dir", run_dir, "--max-failure-rate", "0.5", "--no-progress", timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    with open_run(run_dir) as run:
        assert (run.meta["status"], run.meta.get("error")) == ("completed", None)
        stored = {record.example_id: record for record in run.rollouts()}
        assert len(stored) == 4
        bad = next(record for record in stored.values() if "question 2" in str(record.messages[0]["content"]))
        assert bad.termination_reason == "model_error"
        assert f"malformed completion: usage.prompt_tokens is {HUGE}" in (bad.error or "")
        good = [record for record in stored.values() if record is not bad]
        assert all(record.termination_reason == "finished" and record.reward == 1.0 for record in good)
        assert max(record.prompt_tokens for record in stored.values()) < 2**31

    resumed = run_cli("eval", "--resume", run_dir, "--no-progress", timeout=120)
    assert resumed.returncode == 0, resumed.stdout
    with open_run(run_dir) as run:
        assert run.meta["status"] == "completed"
        assert run.stats().rollouts == 4
