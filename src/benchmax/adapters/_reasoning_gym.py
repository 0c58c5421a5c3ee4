"""reasoning-gym's procedural tasks as a benchmax env: ``reasoning-gym:TASK[,TASK...]``.

reasoning-gym generates puzzles (arithmetic, countdown, word sorting, ...) from a seed and
grades answers with a scorer written for each task. Each task gives ``size`` examples per
split; ``train`` and ``eval`` come from two seeds derived from ``seed`` (hashed, so the
splits' generator streams do not overlap), and ``train`` drops any question that also occurs
in ``eval``. Several tasks are interleaved round-robin. The reward is the task's own
``score_answer`` on the text inside the last ``<answer>...</answer>`` (the package's own
extractor), beside a ``format`` component (exactly one answer tag).

Generator options go in ``config``: for one task, its options
(``{"min_terms": 2}``); for several, one mapping per task (``{"countdown": {...}}``).
:meth:`ReasoningGymEnv.generator_config` is the one place a task's options are decided, so a
difficulty schedule can override it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any, ClassVar

from benchmax.adapters._extras import require
from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, EnvSpecError, ListDataset, completion_text

logger = logging.getLogger(__name__)

PREFIX = "reasoning-gym:"
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def split_seed(seed: int, split: DatasetSplit) -> int:
    """The generator seed of one split: a hash of (seed, split), far from every other.

    reasoning-gym seeds item ``i`` with ``Random(seed + i)``, so seeds that differ
    by less than the dataset size would share items; hashed seeds 2**32 apart
    at random do not (in practice).
    """
    digest = hashlib.sha256(f"benchmax-reasoning-gym:{seed}:{split}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


@functools.cache
def _scorer(task: str) -> Callable[[str | None, dict[str, Any]], float]:
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(task)


def reasoning_gym_env_class(spec: str) -> type[ReasoningGymEnv]:
    """A :class:`ReasoningGymEnv` class bound to the tasks ``spec`` names."""
    tasks = tuple(part.strip() for part in spec.removeprefix(PREFIX).split(","))
    if not tasks or not all(tasks):
        raise EnvSpecError(f"{spec}: write reasoning-gym:TASK[,TASK...], e.g. reasoning-gym:countdown,chain_sum")
    return type("ReasoningGym", (ReasoningGymEnv,), {"default_tasks": tasks, "spec": spec, "__module__": __name__})


class ReasoningGymEnv(BaseEnv):
    """reasoning-gym tasks (see the module doc): ``tasks``, ``seed``, ``size`` per task and split, ``config``."""

    max_turns = 1
    default_tasks: ClassVar[tuple[str, ...]] = ()
    spec: ClassVar[str] = ""

    def __init__(
        self,
        *,
        tasks: Sequence[str] | None = None,
        seed: int = 0,
        size: int = 64,
        config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        where = self.spec or "reasoning-gym"
        reasoning_gym = require("reasoning_gym", where)
        chosen = tuple(tasks if tasks is not None else self.default_tasks)
        if not chosen:
            raise EnvSpecError(f"{where}: name at least one task (reasoning-gym:TASK)")
        known = reasoning_gym.factory.DATASETS
        unknown = [task for task in chosen if task not in known]
        if unknown:
            raise EnvSpecError(
                f"{where}: unknown reasoning-gym task(s) {', '.join(unknown)}; the installed package has "
                f"{len(known)}: {', '.join(sorted(known)[:12])}, ... (reasoning_gym.factory.DATASETS)"
            )
        if len(set(chosen)) != len(chosen):
            raise EnvSpecError(f"{where}: a task is named twice ({', '.join(chosen)})")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise EnvSpecError(f"{where}: seed must be a non-negative int, got {seed!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise EnvSpecError(f"{where}: size must be a positive int, got {size!r}")
        self.tasks = chosen
        self.seed = seed
        self.size = size
        self.config = _per_task(dict(config or {}), chosen, where)

    def generator_config(self, task: str) -> dict[str, Any]:
        """The options ``task``'s generator is built with (``config`` as given)."""
        return dict(self.config.get(task, {}))

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset:
        # Generation is CPU work (countdown searches for solvable targets): keep it off the loop.
        per_task = await asyncio.to_thread(lambda: [self._generate(task, split, max_examples) for task in self.tasks])
        rows = [row for group in zip_longest(*per_task) for row in group if row is not None]
        return ListDataset(rows[:max_examples] if max_examples is not None else rows)

    def _entries(self, task: str, split: DatasetSplit) -> Iterator[dict[str, Any]]:
        import reasoning_gym

        generator = reasoning_gym.create_dataset(
            task, seed=split_seed(self.seed, split), size=self.size, **self.generator_config(task)
        )
        # Item i depends only on (seed, i), so reading a prefix gives the same items.
        return (generator[index] for index in range(self.size))

    def _generate(self, task: str, split: DatasetSplit, max_examples: int | None) -> list[dict[str, Any]]:
        from reasoning_gym.utils import SYSTEM_PROMPTS

        wanted = self.size if max_examples is None else min(max_examples, self.size)
        held_out = {entry["question"] for entry in self._entries(task, "eval")} if split == "train" else set()
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for entry in self._entries(task, split):
            if len(rows) >= wanted:
                break
            question = entry["question"]
            if question in seen or question in held_out:
                continue
            seen.add(question)
            rows.append(
                {
                    "prompt_messages": [
                        {"role": "system", "content": SYSTEM_PROMPTS["default"]},
                        {"role": "user", "content": question},
                    ],
                    "task": task,
                    "entry": {"question": question, "answer": entry["answer"], "metadata": entry["metadata"]},
                }
            )
        if split == "train" and len(rows) < wanted:
            logger.warning("%s train: %d of %d examples left after removing eval questions", task, len(rows), wanted)
        return rows

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        from reasoning_gym.utils import extract_answer

        from benchmax.rewards import run_sync

        text = completion_text(rollout.messages)
        answer = extract_answer(text)  # the package's own extractor: last <answer>...</answer>
        task = rollout.example_args["task"]
        entry = rollout.example_args["entry"]
        score = await run_sync(_scorer(task), answer, entry)
        return {"correct": float(score), "format": float(len(_ANSWER_TAG.findall(text)) == 1)}


def _per_task(config: dict[str, Any], tasks: tuple[str, ...], where: str) -> dict[str, dict[str, Any]]:
    if len(tasks) == 1:
        return {tasks[0]: config}
    stray = [key for key in config if key not in tasks]
    if stray or not all(isinstance(value, Mapping) for value in config.values()):
        raise EnvSpecError(
            f"{where}: with several tasks, config maps each task to its options "
            f"(--env-arg 'config={{\"{tasks[0]}\": {{...}}}}'); got keys {', '.join(map(str, config))}"
        )
    return {task: dict(config.get(task, {})) for task in tasks}
