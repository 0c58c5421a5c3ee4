"""The batch zero-fill: a component missing from a rollout is 0.0 where its batch emitted it."""

from __future__ import annotations

from pathlib import Path

import pytest
from runkit import ENV_SPEC, row, write_split

from benchmax import open_run
from benchmax.runner import RunConfig, arun
from benchmax.store import RolloutRecord

FAIL = [{"status": 400, "message": "scripted failure"}]


def _rows() -> list[dict]:
    """Four examples: plain, failing (model error), with a bonus, plain but answered wrong."""
    return [
        row("4", "plain"),
        row("5", "fails", script=FAIL),
        row("6", "with bonus", bonus=0.5),
        row("7", "answered wrong", answers=["x"]),
    ]


async def _run(tmp_path: Path, server, **options) -> list[RolloutRecord]:
    write_split(tmp_path / "data", _rows())
    config = RunConfig(
        env=ENV_SPEC,
        data_dir=tmp_path / "data",
        base_url=server.base_url,
        model="scripted",
        group_size=2,
        run_dir=tmp_path / "run",
        **options,
    )
    await arun(config)
    with open_run(tmp_path / "run") as run:
        return sorted(run.rollouts(), key=lambda record: record.rollout_id)


def _by_text(records: list[RolloutRecord]) -> dict[str, list[RolloutRecord]]:
    grouped: dict[str, list[RolloutRecord]] = {}
    for record in records:
        grouped.setdefault(record.messages[0]["content"].split("\n")[0], []).append(record)
    return grouped


async def test_the_whole_run_is_one_batch_and_every_rollout_gets_every_component(tmp_path, server):
    records = _by_text(await _run(tmp_path, server))

    expected = {
        # text: (raw rewards, filled components, rewards after the fill)
        "plain": ({"correct": 1.0}, {"bonus"}, {"correct": 1.0, "bonus": 0.0}),
        "fails": ({}, {"correct", "bonus"}, {"correct": 0.0, "bonus": 0.0}),
        "with bonus": ({"correct": 1.0, "bonus": 0.5}, set(), {"correct": 1.0, "bonus": 0.5}),
        "answered wrong": ({"correct": 0.0}, {"bonus"}, {"correct": 0.0, "bonus": 0.0}),
    }
    assert set(records) == set(expected)
    for text, (raw, filled, rewards) in expected.items():
        for record in records[text]:
            assert record.batch == 0
            assert (record.raw_rewards, set(record.filled), record.rewards) == (raw, filled, rewards), text
            assert record.reward == pytest.approx(sum(rewards.values()))
    assert all(record.termination_reason == "model_error" and record.error for record in records["fails"])
    assert not any(record.scored for record in records["fails"])


async def test_batch_size_splits_batches_and_a_component_of_batch_1_is_not_filled_in_batch_0(tmp_path, server):
    records = _by_text(await _run(tmp_path, server, batch_size=4))

    for text in ("plain", "fails"):
        assert {record.batch for record in records[text]} == {0}
        assert all("bonus" not in record.rewards for record in records[text]), "bonus leaked into batch 0"
    for text in ("with bonus", "answered wrong"):
        assert {record.batch for record in records[text]} == {1}
        assert all(record.rewards["bonus"] == (0.5 if text == "with bonus" else 0.0) for record in records[text])
    assert [(r.rewards, set(r.filled), r.reward) for r in records["fails"]] == [
        ({"correct": 0.0}, {"correct"}, 0.0)
    ] * 2
    assert [(set(r.filled), r.reward) for r in records["answered wrong"]] == [({"bonus"}, 0.0)] * 2
    assert [r.reward for r in records["with bonus"]] == [1.5, 1.5]


async def test_a_batch_that_emitted_no_component_leaves_failures_unscored(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "fails", script=FAIL), row("2", "plain")])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted",
        batch_size=1, run_dir=tmp_path / "run",
    )  # fmt: skip
    await arun(config)

    with open_run(tmp_path / "run") as run:
        failed, plain = sorted(run.rollouts(), key=lambda record: record.batch)
    assert (failed.batch, failed.rewards, failed.filled, failed.reward) == (0, {}, frozenset(), None)
    assert (plain.batch, plain.rewards, plain.reward) == (1, {"correct": 1.0}, 1.0)


def test_batch_size_must_be_a_multiple_of_the_group_size():
    with pytest.raises(ValueError, match=r"batch_size \(3 rollouts\) must be a positive multiple of group_size \(2\)"):
        RunConfig(env="x", group_size=2, batch_size=3)
