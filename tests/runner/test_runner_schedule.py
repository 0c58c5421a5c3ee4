"""Scheduling: rollouts in flight stay within ``concurrency``, groups stay whole, progress is reported."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax import evaluate, open_run
from benchmax.envs import BaseEnv, EnvSpecError, ListDataset, SamplingParams
from benchmax.runner import RunConfig, arun
from benchmax.store import StoreError


class CountingEnv(BaseEnv):
    """Tracks how many rollout contexts are open at once."""

    max_turns = 1

    def __init__(self, examples: int) -> None:
        super().__init__()
        self.examples = examples
        self.open = 0
        self.peak = 0
        self.closed = False

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([row(str(index), f"q{index}", sleep=0.03) for index in range(self.examples)])

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self.open += 1
        self.peak = max(self.peak, self.open)
        try:
            yield
        finally:
            self.open -= 1

    async def compute_reward(self, rollout):
        return {"correct": 1.0}

    async def aclose(self):
        self.closed = True


class Recorder:
    def __init__(self) -> None:
        self.start: dict | None = None
        self.groups: list[int] = []

    def on_start(self, *, total_rollouts, done_rollouts, run_dir):
        self.start = {"total": total_rollouts, "done": done_rollouts, "run_dir": run_dir}

    def on_group(self, result, *, env=None):
        self.groups.append(len(result.outcomes))


@pytest.mark.parametrize(("concurrency", "group_size", "peak"), [(4, 2, 4), (1, 3, 3), (5, 2, 4)])
async def test_rollouts_in_flight_never_exceed_the_concurrency_or_split_a_group(
    tmp_path, server, concurrency, group_size, peak
):
    env = CountingEnv(examples=6)
    recorder = Recorder()
    config = RunConfig(
        env="counting", base_url=server.base_url, model="scripted", group_size=group_size,
        concurrency=concurrency, run_dir=tmp_path / "run",
    )  # fmt: skip

    result = await arun(config, env=env, observer=recorder)

    assert env.peak == peak
    assert recorder.start == {"total": 6 * group_size, "done": 0, "run_dir": tmp_path / "run"}
    assert recorder.groups == [group_size] * 6
    assert (result.new_rollouts, result.stats.rollouts) == (6 * group_size, 6 * group_size)
    assert not env.closed, "an env the caller passed in is the caller's to close"


async def test_seeded_siblings_get_consecutive_seeds_and_the_sampling_options(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "only")])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", group_size=3,
        run_dir=tmp_path / "run",
        sampling=SamplingParams(temperature=0.7, max_tokens=9, seed=10, extra_body={"top_k": 5}),
    )  # fmt: skip

    await arun(config)

    bodies = sorted(server.requests, key=lambda body: body["seed"])
    assert [(b["seed"], b["temperature"], b["max_tokens"], b["top_k"], b["model"]) for b in bodies] == [
        (seed, 0.7, 9, 5, "scripted") for seed in (10, 11, 12)
    ]
    with open_run(tmp_path / "run") as run:
        assert sorted(record.sampling["seed"] for record in run.rollouts()) == [10, 11, 12]


def test_evaluate_runs_from_synchronous_code_and_max_examples_caps_the_run(tmp_path, server):
    write_split(tmp_path / "data", [row(str(index), f"q{index}") for index in range(5)])

    result = evaluate(
        ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", max_examples=2,
        run_dir=tmp_path / "run",
    )  # fmt: skip

    assert (result.run_dir, result.new_rollouts, result.stats.rollouts) == (tmp_path / "run", 2, 2)
    assert result.stats.components["correct"].mean == 1.0
    assert server.counts["requests"] == 2
    with open_run(tmp_path / "run") as run:
        assert run.meta["status"] == "completed"
        assert [example.payload["answer"] for example in run.examples()] == ["0", "1"]


async def test_an_env_that_fails_to_load_leaves_no_run_behind(tmp_path, server):
    config = RunConfig(env=str(tmp_path / "missing.py"), base_url=server.base_url, run_dir=tmp_path / "run")

    with pytest.raises(EnvSpecError, match="env file not found"):
        await arun(config)

    assert not (tmp_path / "run" / "run.sqlite").exists(), "nothing ran, so no run is listed"
    assert server.counts["requests"] == 0


async def test_a_second_run_into_the_same_directory_is_refused_and_points_at_resume(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "only")])
    config = RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, run_dir=tmp_path / "run")
    await arun(config)

    with pytest.raises(StoreError, match=rf"{tmp_path / 'run'} already holds a run; continue it with --resume"):
        await arun(config)
