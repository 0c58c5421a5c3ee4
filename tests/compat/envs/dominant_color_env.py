"""Name an image's dominant colour, in the style of benchmax 0.2's ``examples/dominant-color/main.py``.

The dataset is a ``Dataset`` subclass built in code from colour names (rows
of ``{split}.jsonl``); ``create_dataset`` takes no ``max_examples``, and
``max_turns`` is set after ``super().__init__()``.
"""

import json
from pathlib import Path

from images import data_url

from benchmax.envs import Dataset, canonical_example_id
from benchmax.envs.base import BaseEnv, BaseRollout, JsonRow
from benchmax.envs.shared_types import DatasetSplit, Example
from benchmax.rewards import extract_completion_text


class ColorDataset(Dataset[JsonRow]):
    def __init__(self, rows: list[JsonRow]) -> None:
        examples = []
        for row in rows:
            payload: JsonRow = {
                "prompt_messages": [
                    {"role": "system", "content": row["script"]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is the dominant colour? Answer with one word."},
                            {"type": "image_url", "image_url": {"url": data_url(row["color"])}},
                        ],
                    },
                ],
                "color": row["color"],
            }
            examples.append(Example(id=canonical_example_id(payload), payload=payload))
        super().__init__(examples)


class DominantColorEnv(BaseEnv):
    def __init__(self) -> None:
        super().__init__()
        self.max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path) -> ColorDataset:
        rows = [json.loads(line) for line in (base_dir / f"{split}.jsonl").read_text().splitlines() if line.strip()]
        return ColorDataset(rows)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages).lower().rstrip(".")
        return {"correct": float(answer == rollout.example_args["color"]), "one_word": float(len(answer.split()) == 1)}
