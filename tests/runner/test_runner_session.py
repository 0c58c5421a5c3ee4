"""One run session: ids from their parts, whole groups, and a status set on every way out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmax.envs import Environment, Example, ListDataset, RolloutRequest, TerminationReason
from benchmax.runner import GroupKey, LocalExecutor, RunSession, default_run_dir, group_keys
from benchmax.store import open_run


def _example(text: str) -> Example:
    return Example(f"id-{text}", {"prompt_messages": [{"role": "user", "content": text}]})


def test_group_and_rollout_ids_are_built_from_their_parts_and_repeats_are_told_apart():
    a, b = _example("a"), _example("b")
    keys = group_keys("eval", [a, b, a])
    assert [key.id for key in keys] == ["eval/id-a", "eval/id-b", "eval/id-a~1"]
    assert [key.example_index for key in keys] == [0, 1, 2]
    assert keys[2].rollout_id(3) == "eval/id-a~1#3"
    step = GroupKey.of("train", a, 0, step=7, occurrence=1)
    assert (step.id, step.step, step.example_id) == ("step7/train/id-a~1", 7, "id-a")


@pytest.mark.parametrize(
    ("raised", "status", "error"),
    [
        (None, "completed", None),
        (RuntimeError("the disk is full"), "failed", "RuntimeError: the disk is full"),
        (KeyboardInterrupt(), "interrupted", None),
        (asyncio.CancelledError(), "interrupted", None),
    ],
    ids=["completed", "failed", "ctrl-c", "cancelled"],
)
def test_the_status_is_set_on_every_way_out(tmp_path, raised, status, error):
    session = RunSession.create(tmp_path / "run", kind="eval", meta={})
    try:
        with session.lifecycle():
            with open_run(tmp_path / "run") as run:
                assert run.meta["status"] == "running"
            if raised is not None:
                raise raised
    except BaseException as exc:
        assert exc is raised
    with open_run(tmp_path / "run") as run:
        assert run.meta["status"] == status
        assert run.meta.get("error") == error
        assert run.meta["ended_at"] >= run.meta["started_at"]


def test_a_session_abandoned_before_it_ran_is_not_left_running(tmp_path):
    RunSession.create(tmp_path / "a", kind="train", meta={}).abandon(ValueError("no GPU"))
    RunSession.create(tmp_path / "b", kind="train", meta={}).abandon()
    with open_run(tmp_path / "a") as run:
        assert (run.meta["status"], run.meta["error"]) == ("failed", "ValueError: no GPU")
    with open_run(tmp_path / "b") as run:
        assert run.meta["status"] == "interrupted"


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("examples/math", "math"),
        ("examples/math/", "math"),
        ("examples/sql/env.py:SqlEnv", "sql"),
        ("path/to/my_env.py:MyEnv", "my_env"),
        ("mypackage.envs:MathEnv", "envs"),
        ("my-installed-env@1.2", "my-installed-env"),
    ],
)
def test_eval_and_train_name_their_default_run_dirs_by_one_rule(spec, name):
    assert default_run_dir(spec).name.startswith(f"{name}-")
    assert default_run_dir(spec, prefix="train-").name.startswith(f"train-{name}-")
    assert default_run_dir(spec).parent == Path("runs")


class _BrokenHarness(Environment):
    """A custom harness whose own run_group raises."""

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def run_rollout(self, request):
        raise AssertionError("never called: run_group is overridden")

    async def run_group(self, requests):
        raise OSError("the cluster is gone")


async def test_a_group_that_cannot_be_run_is_a_harness_error_whoever_runs_it():
    executor = LocalExecutor(_BrokenHarness())
    example = _example("x")
    requests = [RolloutRequest(f"g#{index}", example, "m", "http://h/v1") for index in range(2)]
    await executor.start()
    try:
        result = await executor.run_group(requests)
    finally:
        await executor.aclose()
    assert [outcome.termination_reason for outcome in result.outcomes] == [TerminationReason.HARNESS_ERROR] * 2
    assert all("OSError: the cluster is gone" in (outcome.error or "") for outcome in result.outcomes)
