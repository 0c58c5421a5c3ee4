"""The run's pass over its dataset: streamed, stored once, checked on resume, and a bad row leaves no run."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax.envs import BaseEnv, DatasetError, ListDataset, canonical_example_id
from benchmax.rewards import extract_completion_text
from benchmax.runner import RunConfig, arun
from benchmax.store import StoreError, open_run


def _config(tmp_path: Path, server, **options) -> RunConfig:
    return RunConfig(
        env=ENV_SPEC,
        data_dir=tmp_path / "data",
        base_url=server.base_url,
        model="scripted",
        run_dir=tmp_path / "run",
        **options,
    )


async def test_a_repeated_example_is_stored_once_and_run_as_its_own_group(tmp_path, server):
    a, b, c = row("a", "qa"), row("b", "qb"), row("c", "qc")
    write_split(tmp_path / "data", [a, b, a, c, a])
    result = await arun(_config(tmp_path, server, group_size=2))
    with open_run(result.run_dir) as run:
        groups = [group.group_id.split("/", 1)[1] for group in run.groups()]
        examples = run.examples()
    ids = [example.id for example in examples]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert groups == [ids[0], ids[1], f"{ids[0]}~1", ids[2], f"{ids[0]}~2"]
    assert result.stats.rollouts == 10 and result.new_rollouts == 10

    resumed = await arun(_config(tmp_path, server, group_size=2), resume=True)
    assert resumed.new_rollouts == 0 and resumed.stats.rollouts == 10


@pytest.mark.parametrize(
    "changed",
    [
        ["a", "c", "a"],  # another example where one was
        ["b", "a", "a"],  # the same examples in another order
        ["a", "b"],  # shorter
        ["a", "b", "a", "c"],  # a new example at the end
    ],
)
async def test_resume_refuses_a_dataset_that_changed(tmp_path, server, changed):
    rows = {name: row(name, f"q{name}") for name in "abc"}
    write_split(tmp_path / "data", [rows["a"], rows["b"], rows["a"]])
    await arun(_config(tmp_path, server))
    write_split(tmp_path / "data", [rows[name] for name in changed])
    with pytest.raises(StoreError, match="the dataset changed since this run started"):
        await arun(_config(tmp_path, server), resume=True)
    with open_run(tmp_path / "run") as run:
        assert len(run) == 3, "nothing stored is lost"


async def test_a_bad_row_past_the_first_leaves_no_run_behind(tmp_path, server):
    path = write_split(tmp_path / "data", [row("a", "qa"), row("b", "qb")])
    with path.open("a") as file:
        file.write(json.dumps({"prompt_messages": [], "answer": "c"}) + "\n")
    with pytest.raises(DatasetError, match=r"eval\.jsonl:3"):
        await arun(_config(tmp_path, server))
    assert not (tmp_path / "run" / "run.sqlite").exists()
    assert server.counts["requests"] == 0, "no rollout is spent before the dataset is read whole"


class HeldEnv(BaseEnv):
    """An in-memory dataset whose rollouts of the ``held`` answers wait until the run is stopped."""

    max_turns = 1

    def __init__(self, rows: list[dict], held: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.rows = rows
        self.held = held

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(self.rows)

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if example.payload["answer"] in self.held:
            await asyncio.Event().wait()  # until the run is cancelled
        yield

    async def compute_reward(self, rollout):
        answer = extract_completion_text(rollout.messages).strip()
        return {"correct": float(answer == rollout.example_args["answer"])}


async def test_a_resumed_in_memory_dataset_runs_exactly_the_groups_left_with_their_own_payloads(tmp_path, server):
    # Every other example's model answer is wrong, so a group run with another example's payload would show.
    rows = [row(f"a{index}", f"q{index}", answers=[f"a{index}" if index % 2 else "wrong"]) for index in range(8)]
    held = frozenset(f"a{index}" for index in (2, 5, 6))
    config = _config(tmp_path, server, concurrency=8)
    first = asyncio.create_task(arun(config, env=HeldEnv(rows, held)))
    deadline = time.monotonic() + 60
    while _groups(tmp_path / "run") < 5:
        assert not first.done(), first
        assert time.monotonic() < deadline, "the five unheld groups were not stored"
        await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    requests = len(server.requests)

    resumed = await arun(config, env=HeldEnv(rows), resume=True)

    assert resumed.new_rollouts == 3
    asked = sorted(body["messages"][0]["content"].split("\n")[0] for body in server.requests[requests:])
    assert asked == ["q2", "q5", "q6"]
    with open_run(tmp_path / "run") as run:
        by_example = {record.example_id: record.rewards["correct"] for record in run.rollouts()}
        assert run.meta["status"] == "completed"
    assert by_example == {canonical_example_id(item): float(index % 2) for index, item in enumerate(rows)}


async def test_resume_refuses_an_in_memory_dataset_that_changed(tmp_path, server):
    rows = [row(name, f"q{name}") for name in "abc"]
    await arun(_config(tmp_path, server), env=HeldEnv(rows))
    with pytest.raises(StoreError, match="the dataset changed since this run started: first difference at index 1"):
        await arun(_config(tmp_path, server), env=HeldEnv([rows[0], rows[2], rows[1]]), resume=True)
    with pytest.raises(StoreError, match="the dataset changed since this run started"):
        await arun(_config(tmp_path, server), env=HeldEnv(rows[:2]), resume=True)


def _groups(run_dir: Path) -> int:
    if not (run_dir / "run.sqlite").exists():
        return 0
    with open_run(run_dir) as run:
        return run.sql("SELECT COUNT(*) FROM groups")[0][0]
