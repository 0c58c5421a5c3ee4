"""Endless datasets and difficulty levels: the env side of procedural data."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from benchmax.envs import (
    BaseEnv,
    EndlessDataset,
    EndlessDatasetError,
    Example,
    LevelledEnv,
    UnknownLevelError,
    check_level,
    has_levels,
    is_endless,
)
from benchmax.loading import open_examples


def _payload(index: int) -> dict[str, object]:
    return {"prompt_messages": [{"role": "user", "content": f"puzzle {index}"}], "n": index}


def test_an_endless_dataset_makes_item_i_from_i_alone_and_never_stops():
    dataset = EndlessDataset(_payload)
    assert is_endless(dataset) and not is_endless([1, 2])
    first = list(itertools.islice(dataset, 5))
    assert [example.payload["n"] for example in first] == [0, 1, 2, 3, 4]
    assert dataset[3] == first[3] == EndlessDataset(_payload)[3]  # same id: the payload's content hash
    assert dataset[10_000_000].payload["n"] == 10_000_000
    assert [example.id for example in dataset.take(3)] == [example.id for example in first[:3]]
    assert EndlessDataset(lambda index: Example(f"x{index}", {"n": index}))[2].id == "x2"
    with pytest.raises(IndexError, match="non-negative int"):
        dataset[-1]
    with pytest.raises(TypeError, match="function of the example index"):
        EndlessDataset(5)  # type: ignore[arg-type]


class _Puzzles(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return EndlessDataset(_payload)

    async def compute_reward(self, rollout):
        return {"correct": 1.0}

    def difficulty_levels(self):
        return ("easy", "hard")

    async def create_level_dataset(self, level, split, base_dir, *, max_examples=None):
        check_level("_Puzzles", level, self.difficulty_levels())
        return EndlessDataset(lambda index: {**_payload(index), "level": level})


async def test_reading_an_endless_dataset_needs_a_cap_unless_the_reader_draws_what_it_needs(tmp_path: Path):
    env = _Puzzles()
    with pytest.raises(EndlessDatasetError, match=r"is endless .* --max-examples N"):
        await open_examples(env, "eval", tmp_path)
    capped = await open_examples(env, "eval", tmp_path, max_examples=4)
    assert [example.payload["n"] for example in capped] == [0, 1, 2, 3]
    drawn = await open_examples(env, "train", tmp_path, endless=True)
    assert is_endless(drawn.dataset)
    assert drawn.example_at(7).payload["n"] == 7


async def test_an_env_with_levels_names_them_and_refuses_one_it_does_not_have(tmp_path: Path):
    env = _Puzzles()
    assert isinstance(env, LevelledEnv) and has_levels(env)
    assert not has_levels(object())
    hard = await env.create_level_dataset("hard", "train", tmp_path)
    assert hard[0].payload["level"] == "hard"
    with pytest.raises(UnknownLevelError, match="no difficulty level 'medium'; its levels are: easy, hard"):
        await env.create_level_dataset("medium", "train", tmp_path)
