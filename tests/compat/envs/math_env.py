"""Single-turn arithmetic in the style of benchmax 0.2's ``examples/math/main.py``.

Written against 0.2.5's import paths and typing (``JsonlDataset[JsonRow]``,
``Example[JsonRow]``), without ``from __future__ import annotations``, as
upstream envs are: the annotations are evaluated when the module loads.
"""

import dataclasses
from pathlib import Path

from benchmax.envs import RolloutFailure, canonical_example_id
from benchmax.envs.base import BaseEnv, BaseRollout, JsonlDataset, JsonRow
from benchmax.envs.shared_types import DatasetSplit, Example, RolloutRequest
from benchmax.rewards import extract_answer_block, extract_completion_text

SYSTEM_PROMPT = "Solve the problem. Put the final answer inside <answer></answer>."


def row_to_example(row: JsonRow) -> Example[JsonRow]:
    payload: JsonRow = {
        "prompt_messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": row["question"]},
        ],
        "answer": str(row["answer"]),
        "mode": row.get("mode", ""),
    }
    return Example(id=canonical_example_id(payload), payload=payload)


class MathDataset(JsonlDataset[JsonRow]):
    def __init__(self, path: Path, *, max_examples: int | None = None) -> None:
        super().__init__(path, row_to_example=row_to_example, max_examples=max_examples)


class MathEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> MathDataset:
        return MathDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        if rollout.example_args["mode"] == "verifier_down":
            raise RolloutFailure("verifier_error", "the verifier is offline")
        answer = extract_answer_block(extract_completion_text(rollout.messages))
        return {
            "correct": float(answer == rollout.example_args["answer"]),
            # benchmax 0.2: a rollout is unscored (rewards None) until compute_reward returns
            "unscored_before": float(rollout.rewards is None),
        }


class RawMathEnv(MathEnv):
    """Rows carry their own ``prompt_messages``; the id is the row's content hash."""

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl",
            row_to_example=lambda row: Example(id=canonical_example_id(row), payload={"mode": "", **row}),
            max_examples=max_examples,
        )


class WrappedMathEnv(MathEnv):
    """Overrides ``run_rollout`` to add a component after the standard loop."""

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        rollout = await super().run_rollout(request)
        return dataclasses.replace(rollout, rewards={**(rollout.rewards or {}), "wrapped": 1.0})
