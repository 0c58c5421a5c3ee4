"""Model server outages through ``benchmax eval`` and the run store: held, not burned; stopped cleanly past the budget.

The model server is a real process (``ServerProcess``) killed with SIGKILL mid-run
and, where the test says so, restarted on the same port; ``benchmax eval`` runs
in a subprocess and writes a real run store. Every reply sleeps a little so the
run is mid-way when the server goes.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from runkit import ENV_SPEC, row, run_cli, start_cli, write_split

import benchmax
from benchmax.engine import EngineConfig
from benchmax.envs import canonical_example_id
from benchmax.runner import EndpointError, RunConfig
from benchmax.store import open_run
from benchmax.testing import ScriptedServer, ServerProcess

EXAMPLES = 20
GROUP = 2


@pytest.fixture
def dataset(tmp_path: Path) -> list[dict[str, Any]]:
    rows = [row(f"a{i}", f"question {i}", script=[{"sleep": 0.2, "content": f"a{i}"}]) for i in range(EXAMPLES)]
    write_split(tmp_path / "data", rows)
    return rows


def _eval(tmp_path: Path, *urls: str, extra: tuple[str, ...] = ()) -> list[str | Path]:
    args: list[str | Path] = ["eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--run-dir", tmp_path / "run"]
    for url in urls:
        args += ["--base-url", url]
    return [*args, "--group-size", str(GROUP), "--concurrency", "4", "--no-progress", *extra]


def _query(run_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    db = run_dir / "run.sqlite"
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return []


def _wait_until(what: str, check: Any, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, f"benchmax eval ended before {what}:\n{proc.communicate()[0]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:g}s"
        time.sleep(0.02)


def _groups(run_dir: Path) -> int:
    found = _query(run_dir, "SELECT COUNT(*) FROM groups")
    return found[0][0] if found else 0


def _outages_stored(run_dir: Path) -> list[dict[str, Any]]:
    found = _query(run_dir, "SELECT value FROM meta WHERE key = 'outages'")
    return json.loads(found[0][0]) if found else []


def _rows(output: str, name: str) -> list[str]:
    """The value cells of the summary table's rows called ``name``."""
    cells = [[cell.strip() for cell in line.split("│")] for line in output.splitlines() if "│" in line]
    return [cell[2] for cell in cells if len(cell) > 2 and cell[1] == name]


def _check_complete(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Every rollout stored once, whole groups, none of them a model error."""
    with open_run(run_dir) as run:
        ids = [record.rollout_id for record in run.rollouts()]
        reasons = {record.termination_reason for record in run.rollouts()}
        per_group = {count for _, count in run.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
    expected = {f"eval/{canonical_example_id(item)}#{sample}" for item in rows for sample in range(GROUP)}
    assert len(ids) == len(set(ids)) and set(ids) == expected
    assert reasons == {"finished"} and per_group == {GROUP}


def test_a_server_killed_mid_run_and_restarted_on_its_port_loses_no_rollout(tmp_path, dataset):
    server = ServerProcess().start()
    try:
        proc = start_cli(*_eval(tmp_path, server.base_url))
        _wait_until("3 groups stored", lambda: _groups(tmp_path / "run") >= 3, proc)
        server.kill()
        _wait_until("the outage recorded", lambda: _outages_stored(tmp_path / "run"), proc)
        time.sleep(1.5)
        server.start()
        output, _ = proc.communicate(timeout=120)
    finally:
        server.kill()
    assert proc.returncode == 0, output
    _check_complete(tmp_path / "run", dataset)
    with open_run(tmp_path / "run") as run:
        (outage,) = run.meta["outages"]
        assert run.meta["status"] == "completed"
    assert outage["endpoint"] == server.base_url and outage["ended_at"] - outage["started_at"] >= 1.5
    assert outage["held"] >= 1 and not outage["failed"]
    out = " ".join(output.split())
    assert f"model endpoint {server.base_url} is down" in out and "held requests resume" in out
    (listed,) = _rows(output, "endpoint outage")
    assert listed.startswith(f"{server.base_url} down at") and listed.endswith("requests held"), listed
    assert "model_error" not in out


def test_an_endpoint_that_never_returns_stops_the_run_past_max_outage_and_resume_finishes_it(tmp_path, dataset):
    server = ServerProcess().start()
    try:
        proc = start_cli(*_eval(tmp_path, server.base_url, extra=("--max-outage", "2")))
        _wait_until("3 groups stored", lambda: _groups(tmp_path / "run") >= 3, proc)
        server.kill()
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, output
        out = " ".join(output.split())
        assert f"the run stopped: endpoint {server.base_url} down for 2 s" in out
        assert "past the outage budget of 2 s (--max-outage)" in out
        assert f"Resume it once the model server is back: benchmax eval --resume {tmp_path / 'run'}" in out
        with open_run(tmp_path / "run") as run:
            assert run.meta["status"] == "failed"
            (outage,) = run.meta["outages"]
            stored = [record.termination_reason for record in run.rollouts()]
            per_group = {count for _, count in run.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
        assert outage["failed"] and outage["held"] >= 1
        assert set(stored) == {"finished"} and 3 * GROUP <= len(stored) < EXAMPLES * GROUP, stored
        assert per_group == {GROUP}, "nothing the outage held was stored"

        server.start()
        resumed = run_cli("eval", "--resume", tmp_path / "run", timeout=120)
    finally:
        server.kill()
    assert resumed.returncode == 0, resumed.stdout
    assert f"resuming: {len(stored)} of {EXAMPLES * GROUP} rollouts already stored" in resumed.stdout
    _check_complete(tmp_path / "run", dataset)


def test_ctrl_c_during_an_outage_exits_130_with_whole_groups_and_resume_finishes(tmp_path, dataset):
    server = ServerProcess().start()
    try:
        proc = start_cli(*_eval(tmp_path, server.base_url))
        _wait_until("3 groups stored", lambda: _groups(tmp_path / "run") >= 3, proc)
        server.kill()
        _wait_until("the outage recorded", lambda: _outages_stored(tmp_path / "run"), proc)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130, output
        assert f"benchmax eval --resume {tmp_path / 'run'}" in output
        with open_run(tmp_path / "run") as run:
            assert run.meta["status"] == "interrupted"
            stored = [record.termination_reason for record in run.rollouts()]
            per_group = {count for _, count in run.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
        assert set(stored) == {"finished"} and per_group == {GROUP}

        server.start()
        resumed = run_cli("eval", "--resume", tmp_path / "run", "--no-progress", timeout=120)
    finally:
        server.kill()
    assert resumed.returncode == 0, resumed.stdout
    _check_complete(tmp_path / "run", dataset)


def test_two_replicas_one_killed_mid_run_the_run_finishes_on_the_other(tmp_path, dataset):
    dying = ServerProcess().start()
    try:
        with ScriptedServer() as staying:
            proc = start_cli(*_eval(tmp_path, dying.base_url, staying.base_url))
            _wait_until("4 groups stored", lambda: _groups(tmp_path / "run") >= 4, proc)
            served_before = staying.counts["requests"]
            dying.kill()
            output, _ = proc.communicate(timeout=120)
            served = staying.counts["requests"]
    finally:
        dying.kill()
    assert proc.returncode == 0, output
    _check_complete(tmp_path / "run", dataset)
    out = " ".join(output.split())
    assert f"{dying.base_url}, {staying.base_url} (2 replicas)" in out
    cells = [cell.split(": ", 1) for cell in _rows(output, "replica")]
    replicas = {url: int(figures.split(" requests")[0].replace(",", "")) for url, figures in cells}
    dying_served = replicas[dying.base_url]
    assert replicas[staying.base_url] == served
    rerouted = [int(cell.split(" ")[0]) for cell in _rows(output, "requests rerouted")]
    assert dying_served + served == EXAMPLES * GROUP + sum(rerouted), "only the requests the kill lost were re-sent"
    assert dying_served >= 2 and served_before >= 2, "both replicas served while both were up"
    with open_run(tmp_path / "run") as run:
        assert run.meta["base_url"] == [dying.base_url, staying.base_url]
        assert run.meta["config"]["base_url"] == [dying.base_url, staying.base_url]
        (outage,) = run.meta["outages"]
    assert outage["endpoint"] == dying.base_url and outage["held"] == 0, "nothing waited: the other replica served"
    assert 0 <= outage["rerouted"] <= sum(rerouted), "the outage keeps the requests its replica lost to the other"


def test_a_run_on_two_replicas_resumes_on_both(tmp_path, dataset):
    with ScriptedServer() as first, ScriptedServer() as second:
        proc = start_cli(*_eval(tmp_path, first.base_url, second.base_url))
        _wait_until("3 groups stored", lambda: _groups(tmp_path / "run") >= 3, proc)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130, output
        before = (first.counts["requests"], second.counts["requests"])
        resumed = run_cli("eval", "--resume", tmp_path / "run", "--no-progress", timeout=120)
        after = (first.counts["requests"], second.counts["requests"])
    assert resumed.returncode == 0, resumed.stdout
    _check_complete(tmp_path / "run", dataset)
    assert after[0] > before[0] and after[1] > before[1], (before, after)


def test_the_preflight_routes_around_an_unreachable_replica_and_refuses_when_none_answers(tmp_path, dataset, caplog):
    dead = ServerProcess()  # a free port, nothing listening
    with ScriptedServer() as live:
        result = benchmax.evaluate(
            ENV_SPEC, data_dir=tmp_path / "data", run_dir=tmp_path / "run", group_size=GROUP, concurrency=4,
            base_url=[dead.base_url, live.base_url],
        )  # fmt: skip
        served = live.counts["requests"]
    assert result.verdict.ok and result.stats.reasons == {"finished": EXAMPLES * GROUP}
    assert served == EXAMPLES * GROUP
    said = " ".join(record.getMessage() for record in caplog.records)
    assert f"replica {dead.base_url} cannot serve yet (cannot reach the model server" in said
    (outage,) = result.outages
    assert outage.endpoint == dead.base_url and outage.ended_at is None and outage.held == 0
    assert result.client_stats["endpoints"][dead.base_url]["requests"] == 0

    with pytest.raises(EndpointError, match="none of the 2 replicas can be reached"):
        benchmax.evaluate(
            ENV_SPEC, data_dir=tmp_path / "data", run_dir=tmp_path / "run2",
            base_url=[dead.base_url, "http://127.0.0.1:9/v1"],
        )  # fmt: skip
    assert not (tmp_path / "run2" / "run.sqlite").exists()


def test_a_replica_without_v1_is_a_mistake_to_fix_not_to_route_around(tmp_path, dataset):
    with ScriptedServer() as live, ScriptedServer() as other:
        root = other.base_url.removesuffix("/v1")
        with pytest.raises(EndpointError, match=rf"try --base-url {root}/v1"):
            benchmax.evaluate(
                ENV_SPEC, data_dir=tmp_path / "data", run_dir=tmp_path / "run", base_url=[live.base_url, root]
            )


def test_replicas_are_kept_in_the_stored_config():
    config = RunConfig(env="x", base_url=["http://a:1/v1", "http://b:1/v1"])
    assert config.base_urls == ("http://a:1/v1", "http://b:1/v1")
    assert RunConfig.from_meta(json.loads(json.dumps(config.to_meta()))) == config
    assert RunConfig(env="x", base_url=["http://a:1/v1"]).base_url == "http://a:1/v1"
    with pytest.raises(ValueError, match="more than once"):
        RunConfig(env="x", base_url=["http://a:1/v1", "http://a:1/v1/"])
    with pytest.raises(ValueError, match="embedded model cannot be one of several replicas"):
        RunConfig(env="x", base_url=["embedded", "http://a:1/v1"])


async def test_a_429_with_retry_after_and_one_500_take_the_retry_path_through_the_runner(tmp_path):
    from benchmax.runner import arun

    faults = [{"status": 500, "times": 1}, {"status": 429, "times": 1, "retry_after": 0}]
    rows = [row(f"a{i}", f"q{i}", script=[{"fail": fault, "content": f"a{i}"}]) for i, fault in enumerate(faults)]
    write_split(tmp_path / "data", rows)
    with ScriptedServer() as server:
        result = await arun(
            RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", run_dir=tmp_path / "run", base_url=server.base_url)
        )
    assert result.stats.reasons == {"finished": 2} and result.outages == ()
    assert result.client_stats["retries"] == {"http_500": 1, "http_429": 1}


def test_a_run_stored_under_the_old_name_of_the_request_limit_resumes_with_the_same_limit():
    """``--max-requests`` has one name from the CLI to the limit (``max_requests``); a run stored
    while the engine called it ``max_concurrent_requests`` resumes with the value it stored."""
    config = RunConfig(env="x", engine=EngineConfig(max_requests=7))
    stored = config.to_meta()
    assert stored["engine"]["max_requests"] == 7
    stored["engine"]["max_concurrent_requests"] = stored["engine"].pop("max_requests")

    assert RunConfig.from_meta(json.loads(json.dumps(stored))).engine.max_requests == 7
    assert config.engine.client_pool().max_requests == 7
