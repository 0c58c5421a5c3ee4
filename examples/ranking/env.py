"""Short answers win: group scoring with ``compute_group_rewards``.

Every example is answered several times (a sibling group). ``compute_reward``
scores each answer on its own (``correct``); once all siblings have finished,
``compute_group_rewards`` compares them and gives ``shortest_correct`` = 1.0 to
the shortest correct answer(s) of the group, 0.0 to the rest. A trainer that
sums components thus prefers answers that are right *and* to the point.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from benchmax.rewards import extract_completion_text

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def is_correct(answer: str, expected: str) -> bool:
    """Whether the expected answer appears in ``answer`` as whole words (case-insensitive)."""
    want = _words(expected)
    got = _words(answer)
    return bool(want) and any(got[i : i + len(want)] == want for i in range(len(got)))


class RankingEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages)
        return {"correct": float(is_correct(answer, rollout.example_args["answer"]))}

    async def compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> dict[str, dict[str, float]]:
        # Only scorable siblings arrive here; a sibling that failed (model error,
        # timeout) neither wins nor blocks the others.
        lengths = {}
        for rollout in rollouts:
            answer = extract_completion_text(rollout.messages).strip()
            if is_correct(answer, rollout.example_args["answer"]):
                lengths[rollout.rollout_id] = len(answer)
        best = min(lengths.values(), default=None)
        return {
            rollout.rollout_id: {"shortest_correct": float(lengths.get(rollout.rollout_id, -1) == best)}
            for rollout in rollouts
        }
