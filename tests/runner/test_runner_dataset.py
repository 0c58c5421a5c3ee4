"""The run's pass over its dataset: streamed, stored once, checked on resume, and a bad row leaves no run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax.envs import DatasetError
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
