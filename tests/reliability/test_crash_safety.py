"""A run survives being killed anywhere: 20 SIGKILLs at random moments, then the same store as an unbroken run.

Each round starts ``benchmax eval`` (``--resume`` once the run exists) in a child
process, kills it with SIGKILL after a random delay, and checks the store for
half-written data. Stop signals are tested while rollouts are stuck in a long
tool call: the run must stop promptly, exit every context and keep whole groups.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import crashkit
import pytest

from benchmax.testing import ScriptedServer

EXAMPLES = 60
GROUP = 2
KILLS = 20


@pytest.fixture
def server():
    with ScriptedServer(policy=crashkit.policy, keep_requests=0) as running:
        yield running


def _eval_args(tmp_path: Path, server: ScriptedServer, run_dir: Path, *extra: str) -> list[str | Path]:
    return [
        "eval", crashkit.ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
        "--model", "scripted", "--group-size", str(GROUP), "--concurrency", str(GROUP), "--seed", "0",
        "--run-dir", run_dir, "--no-progress", "--env-arg", f'trace_dir="{tmp_path / "trace"}"', *extra,
    ]  # fmt: skip


def _run_to_end(argv: list[str | Path], log: Path, *, watch: Path | None = None) -> tuple[float, float]:
    """Run a child to completion; returns (seconds until ``watch`` appeared, seconds in all)."""
    started = time.monotonic()
    child = crashkit.start_cli(argv, log)
    appeared = 0.0
    while watch is not None and not watch.exists() and child.is_alive():
        time.sleep(0.005)
        appeared = time.monotonic() - started
    child.join(120)
    assert child.exitcode == 0, log.read_text()[-3000:]
    return appeared, time.monotonic() - started


def test_twenty_sigkills_at_random_points_then_resume_give_the_store_of_an_unbroken_run(tmp_path, server):
    crashkit.write_split(tmp_path / "data", crashkit.rows(EXAMPLES, sleep=0.02))
    log = tmp_path / "eval.log"
    _run_to_end(["--help"], log)  # boots the fork server, so the timings below are of the eval alone
    reference_dir = tmp_path / "reference"
    start_up, full_run = _run_to_end(
        _eval_args(tmp_path, server, reference_dir), log, watch=reference_dir / "run.sqlite"
    )
    reference = crashkit.store_state(reference_dir)
    assert reference is not None and reference["status"] == "completed"
    assert len(reference["rollouts"]) == EXAMPLES * GROUP

    run_dir = tmp_path / "run"
    chance = random.Random(20)
    mid_run = 0
    stored_before = 0
    groups_before: set[str] = set()
    per_group = (full_run - start_up) / EXAMPLES
    for round_ in range(KILLS):
        state = crashkit.store_state(run_dir)
        created = state is not None and state["status"] is not None
        argv = ["eval", "--resume", run_dir, "--no-progress"] if created else _eval_args(tmp_path, server, run_dir)
        child = crashkit.start_cli(argv, log)
        # One kill in five lands during start-up (store creation included); the rest once the child has
        # stored a new group, a random fraction of a group's time later, so they hit steady writing.
        if round_ % 5 == 0:
            time.sleep(chance.uniform(0.0, start_up))
        else:
            deadline = time.monotonic() + 30
            while crashkit.stored_groups(run_dir) <= len(groups_before) and child.is_alive():
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.002)
            time.sleep(chance.uniform(0.0, 2 * per_group))
        child.kill()
        child.join(30)
        assert child.exitcode in (-signal.SIGKILL, 0), log.read_text()[-3000:]
        state = crashkit.store_state(run_dir)
        if state is None:
            continue
        assert state["problems"] == [], state["problems"]
        assert groups_before <= state["groups"] and len(state["rollouts"]) >= stored_before, "a crash lost groups"
        stored_before = len(state["rollouts"])
        groups_before = state["groups"]
        mid_run += 0 < stored_before < EXAMPLES * GROUP and child.exitcode == -signal.SIGKILL
    assert mid_run >= KILLS // 2, f"only {mid_run} of {KILLS} kills landed mid-run"

    _run_to_end(["eval", "--resume", run_dir, "--no-progress"], log)

    final = crashkit.store_state(run_dir)
    assert final is not None and final["problems"] == [] and final["status"] == "completed"
    assert final["rollouts"] == reference["rollouts"], "same ids, reasons, replies and transcripts"
    assert final["rewards"] == reference["rewards"], "same rewards"
    assert final["groups"] == reference["groups"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_signal_during_long_tool_calls_stops_promptly_exits_every_context_and_keeps_whole_groups(
    tmp_path, server, signum
):
    # Half the examples finish at once; the other half sit in a 30 s tool call when the signal lands.
    quick, stuck = crashkit.rows(6), crashkit.rows(6, tool=True)
    for index, item in enumerate(stuck):
        item["answer"] = f"stuck{index}"
        item["prompt_messages"][0]["content"] += f"\nstuck {index}"
    crashkit.write_split(tmp_path / "data", [*quick, *stuck])
    run_dir, log = tmp_path / "run", tmp_path / "eval.log"
    child = crashkit.start_cli(_eval_args(tmp_path, server, run_dir, "--concurrency", "24"), log)
    events = tmp_path / "trace" / "events.log"
    deadline = time.monotonic() + 30
    while not (events.exists() and events.read_text().count("enter") >= 24):
        assert child.is_alive() and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.02)
    time.sleep(0.3)

    sent = time.monotonic()
    os.kill(child.pid, signum)
    child.join(20)

    assert time.monotonic() - sent < 10, "the run waited for the stuck tool calls"
    assert child.exitcode == (130 if signum == signal.SIGINT else 143), log.read_text()[-3000:]
    assert f"benchmax eval --resume {run_dir}" in " ".join(log.read_text().split())
    counted = Counter(line.split(" ", 1)[0] for line in events.read_text().splitlines())
    assert counted["enter"] == counted["exit"] == 24 and counted["aclose"] == 1
    state = crashkit.store_state(run_dir)
    assert state is not None and state["problems"] == []
    assert state["status"] == "interrupted"
    assert len(state["groups"]) == 6, "the quick groups are kept, the stuck ones are not half-stored"
    assert all(reason == "finished" for reason, _, _ in state["rollouts"].values())


def test_a_kill_while_the_store_is_being_created_leaves_no_run_and_the_same_command_starts_it(tmp_path, server):
    from benchmax.store import _schema as schema

    crashkit.write_split(tmp_path / "data", crashkit.rows(2))
    run_dir, log = tmp_path / "run", tmp_path / "eval.log"
    run_dir.mkdir()
    draft = schema.connect(run_dir / f".{schema.DB_NAME}.creating")  # what a kill mid-creation leaves
    schema.create(draft)
    draft.close()

    assert crashkit.run_cli(["eval", "--resume", run_dir, "--no-progress"], log) == 2
    assert "no benchmax run at" in log.read_text()
    _run_to_end(_eval_args(tmp_path, server, run_dir), log)

    state = crashkit.store_state(run_dir)
    assert state is not None and state["status"] == "completed" and len(state["rollouts"]) == 2 * GROUP
    assert not any(path.name.startswith(".") for path in run_dir.iterdir()), "the leftover draft is cleared"


def test_resuming_a_store_without_its_configuration_says_what_to_do(tmp_path):
    from benchmax.store import _schema as schema

    run_dir, log = tmp_path / "run", tmp_path / "eval.log"
    run_dir.mkdir()
    conn = schema.connect(run_dir / schema.DB_NAME)  # a store some other writer left without meta
    schema.create(conn)
    conn.close()

    assert crashkit.run_cli(["eval", "--resume", run_dir, "--no-progress"], log) == 2
    assert "holds no rollouts; start it again with the same command, without --resume" in " ".join(
        log.read_text().split()
    )
