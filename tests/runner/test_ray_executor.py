"""The Ray executor on a real local Ray cluster (two CPUs), against a real scripted server on loopback.

This module is also the env spec the Ray workers load (``THIS_FILE:ToolEnv``), so
it imports Ray only inside fixtures and tests: a worker, and the subprocess that
checks local mode stays Ray-free, import it without Ray.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

import benchmax
from benchmax.engine import GroupResult
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Example,
    JsonlDataset,
    LogEntry,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    StaticBearerAuth,
    TurnRecord,
    Usage,
)
from benchmax.rewards import extract_completion_text
from benchmax.runner import RunConfig, arun
from benchmax.store import open_run
from benchmax.testing import ScriptedServer

SPEC = f"{Path(__file__).resolve()}:ToolEnv"
log = logging.getLogger("tests.ray_env")


class ToolEnv(BaseEnv):
    """Adds with a tool, logs from its hooks, can kill its own process once (a crashed worker)
    and marks each rollout context it exits (``exit_dir``)."""

    max_turns = 3

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self) -> list[dict[str, Any]]:
        number = {"type": "number"}
        parameters = {"type": "object", "properties": {"a": number, "b": number}, "required": ["a", "b"]}
        return [{"type": "function", "function": {"name": "add", "description": "a + b", "parameters": parameters}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> str:
        log.info("tool %s for %s", tool_name, rollout_id)
        return str(tool_args["a"] + tool_args["b"])

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> Any:
        marker = example.payload.get("crash_marker")
        if example.payload.get("always_crash") or (marker and not Path(marker).exists()):
            if marker:
                Path(marker).write_text(str(os.getpid()))
            os._exit(1)
        try:
            yield
        finally:
            if example.payload.get("exit_dir"):
                (Path(example.payload["exit_dir"]) / rollout_id.replace("/", "_")).touch()

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        log.info("scored %s in pid %d", rollout.rollout_id, os.getpid())
        return {"correct": float(extract_completion_text(rollout.messages) == rollout.example_args["answer"])}


def script(*steps: dict[str, Any]) -> str:
    return f"#script: {orjson.dumps(list(steps)).decode()}"


def row(index: int, *, sleep: float = 0.0, **fields: Any) -> dict[str, Any]:
    """Example ``index``: one ``add`` call, then an answer that is right for even indices."""
    a, b = index, 2 * index
    answer = a + b if index % 2 == 0 else a + b + 1
    steps = [{"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}, {"content": str(answer)}]
    if sleep:
        steps[0]["sleep"] = sleep
    prompt = f"What is {a} + {b}?\n{script(*steps)}"
    return {"prompt_messages": [{"role": "user", "content": prompt}], "answer": str(a + b), **fields}


def write_rows(directory: Path, rows: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "eval.jsonl").write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in rows))
    return directory


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def records(run_dir: Path) -> list[tuple[Any, ...]]:
    with open_run(run_dir) as run:
        return sorted(
            (r.rollout_id, r.example_id, r.termination_reason, r.rewards, r.final_text, r.num_tool_calls)
            for r in run.rollouts()
        )


def config(data_dir: Path, run_dir: Path, server: ScriptedServer, **options: Any) -> RunConfig:
    fields: dict[str, Any] = {
        "env": SPEC,
        "data_dir": data_dir,
        "run_dir": run_dir,
        "base_url": server.base_url,
        "model": "scripted",
        "group_size": 2,
        "sampling": SamplingParams(seed=7),
        **options,
    }
    return RunConfig(**fields)


def test_group_results_with_logs_survive_pickling():
    entry = LogEntry(1.0, "INFO", "env", "scored r#0", "/env.py", 12, 1, "reward", None)
    outcome = RolloutOutcome(
        {"correct": 1.0},
        "finished",
        rollout_id="eval/x#0",
        example_id="x",
        split="eval",
        messages=[{"role": "user", "content": "q"}],
        turns=(TurnRecord(0, 1.0, 0.1, usage=Usage(3, 4), completion_token_ids=(1, 2)),),
        logs=(entry,),
        sampling=SamplingParams(seed=1, stop=("x",)),
    )
    result = GroupResult((outcome,), (entry,))
    example = Example("x", {"prompt_messages": []})
    request = RolloutRequest("eval/x#0", example, "m", "http://h/v1", StaticBearerAuth("k"))
    assert pickle.loads(pickle.dumps(result)) == result
    assert pickle.loads(pickle.dumps(request)) == request


def test_local_mode_never_imports_ray(tmp_path, model_server):
    data = write_rows(tmp_path / "data", [row(i) for i in range(3)])
    code = textwrap.dedent(
        f"""
        import sys
        import benchmax, benchmax.runner
        result = benchmax.evaluate({SPEC!r}, data_dir={str(data)!r}, run_dir={str(tmp_path / "run")!r},
                                   base_url={model_server.base_url!r}, model="scripted")
        assert result.stats.rollouts == 3, result.stats
        print("ray" in sys.modules, any(name.startswith("ray.") for name in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_ray_and_local_runs_store_the_same_records(tmp_path, ray_cluster, model_server):
    data = write_rows(tmp_path / "data", [row(i) for i in range(8)])
    common = {"data_dir": data, "base_url": model_server.base_url, "model": "scripted", "group_size": 2}
    local = benchmax.evaluate(SPEC, run_dir=tmp_path / "local", **common)
    remote = benchmax.evaluate(SPEC, run_dir=tmp_path / "ray", executor="ray", workers=2, **common)

    assert records(tmp_path / "ray") == records(tmp_path / "local")
    assert (remote.stats.rollouts, remote.stats.groups, remote.stats.passed) == (16, 8, 8)
    assert remote.stats.components == local.stats.components
    assert remote.client_stats["requests"] == local.client_stats["requests"] == 32
    assert remote.client_stats["ray"]["workers"] == 2
    assert remote.client_stats["ray"]["worker_deaths"] == 0
    assert ray_cluster.is_initialized(), "the executor must not shut down a cluster it did not start"


async def test_worker_logs_reach_the_store_with_their_rollout_ids(tmp_path, ray_cluster, model_server):
    data = write_rows(tmp_path / "data", [row(i) for i in range(4)])
    result = await arun(config(data, tmp_path / "run", model_server, executor="ray", workers=2))
    assert result.stats.rollouts == 8
    with open_run(tmp_path / "run") as run:
        for record in run.rollouts():
            messages = [entry.message for entry in run.logs(rollout_id=record.rollout_id)]
            assert messages[0] == f"tool add for {record.rollout_id}"
            assert messages[1].startswith(f"scored {record.rollout_id} in pid ")
            assert int(messages[1].rsplit(" ", 1)[1]) != os.getpid()
            phases = [entry.phase for entry in run.logs(rollout_id=record.rollout_id)]
            assert phases == ["tools", "reward"]


async def test_a_worker_process_that_dies_mid_run_has_its_groups_rerun_without_loss_or_duplicates(
    tmp_path, ray_cluster, model_server
):
    marker = tmp_path / "crashed-once"
    rows = [row(i, sleep=0.2) for i in range(10)]
    rows[3]["crash_marker"] = str(marker)
    data = write_rows(tmp_path / "data", rows)
    result = await arun(config(data, tmp_path / "run", model_server, executor="ray", workers=2, concurrency=8))

    assert marker.exists(), "the crash never happened, so nothing was tested"
    ray_stats = result.client_stats["ray"]
    assert ray_stats["worker_deaths"] == 1
    assert ray_stats["groups_rerun"] >= 1
    assert ray_stats["workers_started"] == 3, "the dead worker is replaced"
    assert (result.stats.rollouts, result.stats.groups, result.stats.passed) == (20, 10, 10)
    assert result.stats.reasons == {"finished": 20}
    with open_run(tmp_path / "run") as run:
        ids = [record.rollout_id for record in run.rollouts()]
        assert len(ids) == len(set(ids)) == 20
        assert run.meta["status"] == "completed"


async def test_a_group_that_kills_every_worker_it_meets_is_stored_as_a_harness_error_and_the_run_goes_on(
    tmp_path, ray_cluster, model_server
):
    rows = [row(i) for i in range(4)]
    rows[1]["always_crash"] = True
    data = write_rows(tmp_path / "data", rows)
    result = await arun(config(data, tmp_path / "run", model_server, executor="ray", workers=2))

    assert result.client_stats["ray"]["worker_deaths"] == 3
    assert result.stats.reasons == {"finished": 6, "harness_error": 2}
    with open_run(tmp_path / "run") as run:
        lost = [record for record in run.rollouts() if record.termination_reason == "harness_error"]
        assert {record.example_id for record in lost} == {JsonlDataset(data / "eval.jsonl")[1].id}
        assert all("died 3 times" in (record.error or "") for record in lost)
        assert run.meta["status"] == "completed"


async def test_killing_the_actor_running_a_group_reruns_it_on_another(tmp_path, ray_cluster):
    from benchmax.runner._ray import RayExecutor

    data = write_rows(tmp_path / "data", [])
    with ScriptedServer() as slow_server:
        executor = RayExecutor(config(data, tmp_path / "run", slow_server, workers=2))
        await executor.start()
        try:
            item = row(5, sleep=1.0)
            example = Example("slow", item)
            requests = [
                RolloutRequest(f"eval/slow#{i}", example, "scripted", slow_server.base_url, split="eval")
                for i in range(2)
            ]
            task = asyncio.create_task(executor.run_group(requests))
            deadline = time.monotonic() + 30
            while slow_server.counts["requests"] < 2:
                assert time.monotonic() < deadline, "the group never reached the server"
                await asyncio.sleep(0.02)
            busy = [actor for actor, in_flight in executor.actors() if in_flight]
            assert len(busy) == 1
            ray_cluster.kill(busy[0], no_restart=True)
            result = await asyncio.wait_for(task, 60)
        finally:
            await executor.aclose()

    assert [outcome.rollout_id for outcome in result.outcomes] == ["eval/slow#0", "eval/slow#1"]
    assert [outcome.termination_reason for outcome in result.outcomes] == ["finished", "finished"]
    assert slow_server.counts["requests"] == 6, "first turn twice (killed, rerun) and second turn once per sibling"
    stats = executor.stats()["ray"]
    assert (stats["worker_deaths"], stats["groups_rerun"], stats["groups"]) == (1, 1, 1)


async def test_cancelling_a_group_cancels_its_rollouts_on_the_worker(tmp_path, ray_cluster):
    from benchmax.runner._ray import RayExecutor

    data = write_rows(tmp_path / "data", [])
    exits = tmp_path / "exits"
    exits.mkdir()
    with ScriptedServer() as slow_server:
        executor = RayExecutor(config(data, tmp_path / "run", slow_server, workers=1))
        await executor.start()
        try:
            example = Example("slow", row(1, sleep=30.0, exit_dir=str(exits)))
            request = RolloutRequest("eval/slow#0", example, "scripted", slow_server.base_url, split="eval")
            task = asyncio.create_task(executor.run_group([request]))
            deadline = time.monotonic() + 30
            while not slow_server.counts["requests"]:
                assert time.monotonic() < deadline, "the group never reached the server"
                await asyncio.sleep(0.02)
            began = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            while not (exits / "eval_slow#0").exists():
                assert time.monotonic() - began < 10, "the worker never exited the rollout's context"
                await asyncio.sleep(0.05)
            assert executor.actors()[0][1] == 0
        finally:
            await executor.aclose()
    assert executor.stats()["ray"]["worker_deaths"] == 0


async def test_a_slow_group_does_not_hold_back_groups_that_finished(tmp_path, ray_cluster, model_server):
    rows = [row(0, sleep=3.0)] + [row(i) for i in range(1, 7)]
    data = write_rows(tmp_path / "data", rows)
    settled: list[tuple[str, float]] = []

    class Observer:
        def on_start(self, **_: Any) -> None:
            settled.append(("start", time.monotonic()))

        def on_group(self, result: GroupResult, *, env: str | None = None) -> None:
            settled.append((result.outcomes[0].example_id, time.monotonic()))

    slow_id = JsonlDataset(data / "eval.jsonl")[0].id
    result = await arun(config(data, tmp_path / "run", model_server, executor="ray", workers=2), observer=Observer())

    assert result.stats.rollouts == 14
    order = [name for name, _ in settled]
    assert order[-1] == slow_id
    fast_done = settled[-2][1] - settled[0][1]
    slow_done = settled[-1][1] - settled[0][1]
    assert fast_done < 2.5 < 3.0 <= slow_done


async def test_rollouts_in_flight_are_bounded_across_the_pool(tmp_path, ray_cluster):
    from benchmax.runner._ray import RayExecutor

    data = write_rows(tmp_path / "data", [])
    with ScriptedServer() as counting:
        executor = RayExecutor(config(data, tmp_path / "run", counting, workers=2, group_size=1, concurrency=2))
        await executor.start()
        try:
            examples = [Example(f"e{i}", row(i, sleep=0.5)) for i in range(6)]
            requests = [RolloutRequest(f"eval/{e.id}#0", e, "scripted", counting.base_url) for e in examples]
            began = time.monotonic()
            peak = 0

            async def watch() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, sum(in_flight for _, in_flight in executor.actors()))
                    await asyncio.sleep(0.01)

            watcher = asyncio.create_task(watch())
            results = await asyncio.gather(*(executor.run_group([request]) for request in requests))
            elapsed = time.monotonic() - began
            watcher.cancel()
        finally:
            await executor.aclose()

    assert [r.outcomes[0].termination_reason for r in results] == ["finished"] * 6
    assert peak == 2
    assert elapsed >= 1.5, "six 0.5 s rollouts, two at a time, take three rounds"


async def test_an_env_that_cannot_start_on_a_worker_fails_with_the_spec_and_cause(tmp_path, ray_cluster, model_server):
    from benchmax.runner._ray import RayExecutor

    broken = tmp_path / "broken_env.py"
    broken.write_text("import benchmax_dependency_missing_on_workers\n")
    executor = RayExecutor(RunConfig(env=f"{broken}:Env", base_url=model_server.base_url, workers=1))
    expected = r"could not start env .*broken_env\.py:Env.*No module named .benchmax_dependency_missing_on_workers"
    with pytest.raises(RuntimeError, match=rf"{expected}.*importable on every Ray node"):
        await executor.start()
    await executor.aclose()
    assert ray_cluster.is_initialized()


async def test_ray_actors_share_the_response_cache_and_their_calls_are_priced_on_the_driver(
    tmp_path, ray_cluster, model_server
):
    from benchmax.client import CacheSettings

    data = write_rows(tmp_path / "data", [row(i) for i in range(4)])
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."scripted"]\nprompt = 0\ncompletion = 1000000\n')  # $1 per one-token reply
    options = {"executor": "ray", "workers": 2, "prices": str(prices), "cache": CacheSettings(tmp_path / "cache")}
    before = model_server.counts["requests"]

    first = await arun(config(data, tmp_path / "first", model_server, **options))
    sent = model_server.counts["requests"] - before
    second = await arun(config(data, tmp_path / "second", model_server, **options))

    assert sent == 16, "4 groups of 2 rollouts, 2 turns each"
    assert model_server.counts["requests"] - before == sent, "the second run's actors found every reply cached"
    assert first.cost is not None and first.cost["usd"] == pytest.approx(16)
    assert [(c["requests"], c["cache_misses"], c["cache_hits"]) for c in first.cost["calls"]] == [(16, 16, 0)]
    assert second.cost is not None and second.cost["usd"] == 0
    assert [(c["requests"], c["cache_hits"]) for c in second.cost["calls"]] == [(0, 16)]
    assert records(tmp_path / "second") == records(tmp_path / "first")
