"""``concurrency`` counts rollouts in flight for an eval and a rescore, on either executor.

Counted where the requests arrive: the scripted servers (the policy's, and the judge's that
the reward calls) record the most chat requests they were answering at once. A rollout makes
one request at a time to each, so requests in flight bound rollouts in flight from below.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from runkit import row, write_split

from benchmax import open_run
from benchmax.runner import RolloutSlots, RunConfig, arescore, arun
from benchmax.testing import ScriptedServer

JUDGED_ENV = f"{Path(__file__).resolve().parent / 'support' / 'judged_env.py'}:JudgedEnv"
CONCURRENCY = 3
GROUP_SIZE = 2


def _slow_judge(body: dict) -> dict:
    return {"content": '{"score": 1}', "sleep": 0.05}


@pytest.fixture
def judge():
    with ScriptedServer(policy=_slow_judge) as running:
        yield running


@pytest.mark.parametrize("executor", ["local", "ray"])
async def test_eval_and_rescore_keep_at_most_concurrency_rollouts_in_flight(tmp_path, server, judge, executor, request):
    workers = None
    if executor == "ray":
        request.getfixturevalue("ray_cluster")
        workers = 2
    write_split(tmp_path / "data", [row(str(index), f"q{index}", sleep=0.05) for index in range(6)])
    config = RunConfig(
        env=JUDGED_ENV, env_kwargs={"judge_url": judge.base_url}, data_dir=tmp_path / "data",
        base_url=server.base_url, model="scripted", group_size=GROUP_SIZE, concurrency=CONCURRENCY,
        executor=executor, workers=workers, run_dir=tmp_path / "run",
    )  # fmt: skip

    result = await arun(config)

    assert result.stats.rollouts == 6 * GROUP_SIZE
    assert 1 <= server.max_in_flight <= CONCURRENCY
    assert 1 <= judge.max_in_flight <= CONCURRENCY
    judged = judge.counts["requests"]
    judge.max_in_flight = 0

    target = await arescore(
        tmp_path / "run", run_dir=tmp_path / "rescored", concurrency=CONCURRENCY, executor=executor, workers=workers
    )

    assert judge.counts["requests"] == 2 * judged, "every rollout is judged again"
    assert 1 <= judge.max_in_flight <= CONCURRENCY, "rescore counts rollouts, not groups"
    with open_run(target) as run:
        assert [record.raw_rewards["judge"] for record in run.rollouts()] == [1.0] * 6 * GROUP_SIZE


async def test_rescore_refuses_an_unknown_executor(tmp_path):
    with pytest.raises(ValueError, match="local or ray"):
        await arescore(tmp_path / "run", executor="dask")


async def test_a_group_claimed_by_the_run_loop_is_not_counted_again_by_its_executor():
    """One limit: the run loop claims a group's slots before starting it, and the executor's own
    hold inside that claim takes nothing more (counted twice, a group as large as the limit would
    wait for itself forever); the slots come back when the group ends, and only then does the next
    group's claim go through."""
    slots = RolloutSlots(GROUP_SIZE)
    claim = await slots.claim(GROUP_SIZE)
    waiting = asyncio.ensure_future(slots.claim(GROUP_SIZE))

    async def group() -> int:
        async with claim, slots.hold(GROUP_SIZE):  # the executor's hold, as LocalExecutor.run_group takes it
            await asyncio.sleep(0)
            return slots.used

    assert await asyncio.wait_for(group(), timeout=30) == GROUP_SIZE
    second = await asyncio.wait_for(waiting, timeout=30)
    assert slots.used == GROUP_SIZE
    second.release()
    second.release()  # only the first release counts
    assert slots.used == 0
