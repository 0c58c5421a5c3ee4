"""Procedural reasoning tasks from the ``reasoning-gym`` package, scored by its own scorers.

``reasoning-gym`` generates puzzles (arithmetic, countdown, word sorting, …) from
a seed and grades answers with a scorer written for each task. This env picks
one task by name, builds ``train`` and ``eval`` from two different seeds derived
from ``seed`` (hashed, so the splits' generator streams do not overlap), drops from
``train`` any question that also occurs in ``eval``, and scores the text inside
the last ``<answer>…</answer>`` with the package's ``score_answer``.

    benchmax eval examples/reasoning_gym --env-arg task=countdown --env-arg size=32

Tasks with a reasoning-gym curriculum expose its levels (``difficulty_levels()``, ``"0"``
easiest): ``level`` picks one for both splits, and ``benchmax train --curriculum levels``
moves through them as the policy passes. ``endless=True`` generates the splits without end
(training draws what it needs; an eval takes ``--max-examples``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import reasoning_gym
from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

from benchmax.adapters import split_seed
from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, EndlessDataset, ListDataset, check_level
from benchmax.rewards import extract_completion_text, run_sync

logger = logging.getLogger(__name__)

TASKS = (
    "basic_arithmetic",
    "chain_sum",
    "countdown",
    "word_sorting",
    "spell_backward",
    "letter_counting",
    "word_sequence_reversal",
    "number_sorting",
)
"""Tasks this example is tested with: they generate offline in well under a second per
64 examples (countdown: ~3 s) and their scorers accept their own reference answers."""

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


_HELD_OUT_OFFSET = 2**30
"""An endless train split's item that repeats a held-out question is replaced by the item this far on."""


@functools.cache
def _scorer(task: str) -> Callable[[str | None, dict[str, Any]], float]:
    return reasoning_gym.get_score_answer_fn(task)


class ReasoningGymEnv(BaseEnv):
    """One ``reasoning-gym`` task: ``task`` (a registered name), ``seed``, ``size`` per split.

    ``config`` passes task options through to the generator (for example
    ``{"min_terms": 2, "max_terms": 3}`` for ``basic_arithmetic``), over the options of
    ``level`` (one of :meth:`difficulty_levels`) when one is given. ``endless``: the
    splits are generated without end (``size`` then only bounds the held-out questions
    kept out of ``train``).
    """

    max_turns = 1

    def __init__(
        self,
        *,
        task: str = "basic_arithmetic",
        seed: int = 0,
        size: int = 64,
        config: Mapping[str, Any] | None = None,
        level: str | int | None = None,
        endless: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if task not in reasoning_gym.factory.DATASETS:
            known = ", ".join(TASKS)
            raise ValueError(
                f"unknown reasoning-gym task {task!r}; tested ones: {known} "
                f"(all {len(reasoning_gym.factory.DATASETS)}: reasoning_gym.factory.DATASETS)"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if not isinstance(endless, bool):
            raise ValueError(f"endless must be true or false, got {endless!r}")
        self.task = task
        self.seed = seed
        self.size = size
        self.config = dict(config or {})
        self.endless = endless
        self.level = (
            None if level is None else check_level(f"reasoning-gym task {task!r}", str(level), self.difficulty_levels())
        )

    def difficulty_levels(self) -> tuple[str, ...]:
        """The task's curriculum levels, easiest first (``()`` for a task without a curriculum).

        Level ``n`` sets every attribute of reasoning-gym's curriculum to its ``n``-th value
        (or its last, for an attribute with fewer): the package's own global level.
        """
        if not reasoning_gym.factory.has_curriculum(self.task):
            return ()
        curriculum = reasoning_gym.factory.create_curriculum(self.task)
        count = max((len(attribute.levels) for attribute in curriculum.attributes.values()), default=0)
        return tuple(str(index) for index in range(count))

    async def create_level_dataset(
        self, level: str, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> EndlessDataset | ListDataset:
        """The examples of one level: endless, or its first ``max_examples``."""
        level = check_level(f"reasoning-gym task {self.task!r}", level, self.difficulty_levels())
        generator = self._generator(f"{split}:level{level}", level, _HELD_OUT_OFFSET * 2)
        dataset = EndlessDataset(lambda index: self._row(generator[index]))
        if max_examples is None:
            return dataset
        return await asyncio.to_thread(dataset.take, max_examples)

    def _options(self, level: str | None) -> dict[str, Any]:
        """The generator's options: the level's (from the task's curriculum), then ``config``'s."""
        if level is None:
            return dict(self.config)
        curriculum = reasoning_gym.factory.create_curriculum(self.task)
        curriculum.set_global_level(int(level))
        generated = dataclasses.asdict(curriculum.generate_configuration({}))
        generated.pop("seed", None)
        generated.pop("size", None)
        return {**generated, **self.config}

    def _generator(self, stream: str, level: str | None, size: int) -> Any:
        return reasoning_gym.create_dataset(
            self.task, seed=split_seed(self.seed, stream), size=size, **self._options(level)
        )

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset | EndlessDataset:
        if self.endless:
            dataset = await asyncio.to_thread(self._endless, split)
            return dataset if max_examples is None else await asyncio.to_thread(dataset.take, max_examples)
        # Generation is CPU work (countdown searches for solvable targets): keep it off the loop.
        rows = await asyncio.to_thread(self._generate, split, max_examples)
        return ListDataset(rows)

    def _endless(self, split: DatasetSplit) -> EndlessDataset:
        """Item ``i`` of the split's generator, without end; in ``train``, an item whose question
        is one of the first ``size`` held-out ones is replaced by item ``i + 2**30``."""
        generator = self._generator(split, self.level, _HELD_OUT_OFFSET * 2)
        held_out = {entry["question"] for entry in self._entries("eval")} if split == "train" else set()

        def example(index: int) -> dict[str, Any]:
            entry = generator[index]
            if entry["question"] in held_out:
                entry = generator[index + _HELD_OUT_OFFSET]
            return self._row(entry)

        return EndlessDataset(example)

    def _entries(self, split: DatasetSplit) -> Iterator[dict[str, Any]]:
        generator = self._generator(split, self.level, self.size)
        # Item i depends only on (seed, i), so reading a prefix gives the same items.
        return (generator[index] for index in range(self.size))

    def _row(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "prompt_messages": [
                {"role": "system", "content": SYSTEM_PROMPTS["default"]},
                {"role": "user", "content": entry["question"]},
            ],
            "task": self.task,
            "entry": {"question": entry["question"], "answer": entry["answer"], "metadata": entry["metadata"]},
        }

    def _generate(self, split: DatasetSplit, max_examples: int | None) -> list[dict[str, Any]]:
        wanted = self.size if max_examples is None else min(max_examples, self.size)
        held_out = {entry["question"] for entry in self._entries("eval")} if split == "train" else set()
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for entry in self._entries(split):
            if len(rows) >= wanted:
                break
            question = entry["question"]
            if question in seen or question in held_out:
                continue
            seen.add(question)
            rows.append(self._row(entry))
        if split == "train" and len(rows) < wanted:
            logger.warning(
                "%s train: %d of %d examples left after removing eval questions", self.task, len(rows), wanted
            )
        return rows

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        answer = extract_answer(text)  # the package's own extractor: last <answer>…</answer>
        task = rollout.example_args["task"]
        entry = rollout.example_args["entry"]
        score = await run_sync(_scorer(task), answer, entry)
        return {"correct": float(score), "format": float(len(_ANSWER_TAG.findall(text)) == 1)}
