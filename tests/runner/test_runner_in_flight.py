"""``concurrency`` counts rollouts in flight for an eval and a rescore, on either executor.

Counted where the requests arrive: the scripted servers (the policy's, and the judge's that
the reward calls) record the most chat requests they were answering at once. A rollout makes
one request at a time to each, so requests in flight bound rollouts in flight from below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runkit import row, write_split

from benchmax import open_run
from benchmax.runner import RunConfig, arescore, arun
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
