"""Math with group-relative rewards, in the style of benchmax 0.2's ``examples/math/math_group_env.py``.

``mode`` in a row makes the group hook misbehave on purpose: ``drop_one``
leaves a rollout out of its mapping, ``raise`` raises, ``judge_down`` raises a
``RolloutFailure``, ``empty`` returns no component at all.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmax.envs import RolloutFailure, canonical_example_id
from benchmax.envs.base import BaseEnv, BaseRollout, JsonlDataset, JsonRow
from benchmax.envs.shared_types import DatasetSplit, Example, RewardMap
from benchmax.rewards import extract_answer_block, extract_completion_text


def row_to_example(row: JsonRow) -> Example[JsonRow]:
    payload: JsonRow = {
        "prompt_messages": [{"role": "user", "content": row["question"]}],
        "answer": str(row["answer"]),
        "mode": row.get("mode", ""),
    }
    return Example(id=canonical_example_id(payload), payload=payload)


def answer_of(rollout: BaseRollout) -> str:
    return extract_answer_block(extract_completion_text(rollout.messages))


class MathGroupEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=row_to_example, max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        if rollout.example_args["mode"] == "empty":
            return None
        return {"correct": float(answer_of(rollout) == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> Mapping[str, RewardMap] | None:
        mode = rollouts[0].example_args["mode"]
        if mode == "raise":
            raise ValueError("group scoring broke")
        if mode == "judge_down":
            raise RolloutFailure("judge_error", "the group judge is offline")
        if mode == "empty":
            return {rollout.rollout_id: {} for rollout in rollouts}
        answers = [answer_of(rollout) for rollout in rollouts]
        top, _ = Counter(answers).most_common(1)[0]
        rewards = {
            rollout.rollout_id: {
                "majority": float(answer == top),
                "siblings_scored": float(len(rollouts)),
                "saw_individual": float(bool(rollout.rewards) and "correct" in rollout.rewards),
            }
            for rollout, answer in zip(rollouts, answers, strict=True)
        }
        if mode == "drop_one":
            rewards.pop(rollouts[0].rollout_id)
        return rewards
