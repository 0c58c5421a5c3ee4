"""Model server outages under the Ray executor: each actor holds its own requests, the driver sees one outage.

A real local Ray cluster (two CPUs, two actors) and a real model server process,
killed with SIGKILL mid-run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax.engine import GroupResult
from benchmax.runner import RunConfig, RunStopped, arun
from benchmax.store import open_run
from benchmax.testing import ScriptedServer, ServerProcess

EXAMPLES = 16
GROUP = 2


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rows = [row(f"a{i}", f"question {i}", script=[{"sleep": 0.2, "content": f"a{i}"}]) for i in range(EXAMPLES)]
    write_split(tmp_path / "data", rows)
    return tmp_path / "data"


class _AfterGroups:
    """Sets ``reached`` once ``count`` groups are stored."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.reached = asyncio.Event()
        self.outages: list[tuple[str, Any, int]] = []

    def on_start(self, **_: Any) -> None:
        pass

    def on_group(self, result: GroupResult, *, env: str | None = None) -> None:
        self.count -= 1
        if self.count <= 0:
            self.reached.set()

    def on_outage(self, event: str, outage: Any, waiting: int) -> None:
        self.outages.append((event, outage, waiting))


def _config(data: Path, run_dir: Path, *urls: str, **options: Any) -> RunConfig:
    return RunConfig(
        env=ENV_SPEC, data_dir=data, run_dir=run_dir, base_url=list(urls), model="scripted", group_size=GROUP,
        concurrency=8, executor="ray", workers=2, **options,
    )  # fmt: skip


async def test_under_ray_a_server_killed_and_restarted_is_one_outage_and_no_rollout_is_lost(
    tmp_path, ray_cluster, data
):
    server = ServerProcess().start()
    observer = _AfterGroups(2)
    try:
        run = asyncio.ensure_future(arun(_config(data, tmp_path / "run", server.base_url), observer=observer))
        await asyncio.wait_for(observer.reached.wait(), 120)
        await asyncio.to_thread(server.kill)
        while not any(event == "down" for event, _, _ in observer.outages):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.start)
        result = await asyncio.wait_for(run, 120)
    finally:
        server.kill()
    assert result.stats.reasons == {"finished": EXAMPLES * GROUP}
    (outage,) = result.outages  # both actors' gates, merged: from the first trip to the last recovery
    assert outage.ended_at is not None and outage.seconds >= 1.0 and outage.held >= 1
    with open_run(tmp_path / "run") as stored:
        ids = [record.rollout_id for record in stored.rollouts()]
        (recorded,) = stored.meta["outages"]
    assert len(ids) == len(set(ids)) == EXAMPLES * GROUP
    assert recorded["started_at"] == outage.started_at and recorded["ended_at"] == outage.ended_at


async def test_under_ray_an_endpoint_that_never_returns_stops_the_run_with_nothing_half_stored(
    tmp_path, ray_cluster, data
):
    server = ServerProcess().start()
    observer = _AfterGroups(2)
    config = _config(data, tmp_path / "run", server.base_url)
    config = RunConfig.from_meta({**config.to_meta(), "engine": {**config.to_meta()["engine"], "max_outage": 2.0}})
    try:
        run = asyncio.ensure_future(arun(config, observer=observer))
        await asyncio.wait_for(observer.reached.wait(), 120)
        await asyncio.to_thread(server.kill)
        with pytest.raises(RunStopped, match=r"down for 2 s .*past the outage budget of 2 s"):
            await asyncio.wait_for(run, 60)
    finally:
        server.kill()
    with open_run(tmp_path / "run") as stored:
        reasons = {record.termination_reason for record in stored.rollouts()}
        per_group = {count for _, count in stored.sql("SELECT group_id, COUNT(*) FROM rollouts GROUP BY group_id")}
        assert stored.meta["status"] == "failed"
        assert any(outage["failed"] for outage in stored.meta["outages"])
    assert reasons == {"finished"} and per_group == {GROUP}, "no rollout the outage held was stored"


async def test_under_ray_two_replicas_one_killed_the_run_finishes_on_the_other(tmp_path, ray_cluster, data):
    dying = ServerProcess().start()
    observer = _AfterGroups(2)
    try:
        with ScriptedServer() as staying:
            run = asyncio.ensure_future(
                arun(_config(data, tmp_path / "run", dying.base_url, staying.base_url), observer=observer)
            )
            await asyncio.wait_for(observer.reached.wait(), 120)
            await asyncio.to_thread(dying.kill)
            result = await asyncio.wait_for(run, 120)
    finally:
        dying.kill()
    assert result.stats.reasons == {"finished": EXAMPLES * GROUP}
    served = result.client_stats["endpoints"]
    assert served[dying.base_url]["requests"] >= 1 and served[staying.base_url]["requests"] >= 1
    assert not result.client_stats["retries"] and not result.client_stats["failures"]
