"""A short-answer format task a 135M model can learn on a CPU in minutes.

The system prompt asks for one word. Untrained, SmolLM2-135M-Instruct often
answers in a sentence ("The capital of Italy is Rome."), sometimes in one word;
GRPO pushes it toward the bare answer. Components:

- ``correct``: 1.0 when the expected answer appears in the reply;
- ``brevity``: 1.0 for a one-word reply, else 1 / words;
- ``exact``: conditional, emitted only for one-word replies: 1.0 when that word
  is the answer. Replies of several words lack it, and the batch zero-fill
  gives them 0.0.

``benchmax train examples/format --model embedded`` trains on it.
"""

from __future__ import annotations

import string
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset
from benchmax.rewards import extract_completion_text


class FormatEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None) -> JsonlDataset:
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages).strip()
        words = text.split()
        expected = str(rollout.example_args["answer"]).lower()
        rewards = {
            "correct": float(expected in text.lower()),
            "brevity": 1.0 / max(1, len(words)),
        }
        if len(words) == 1:
            rewards["exact"] = float(words[0].strip(string.punctuation).lower() == expected)
        return rewards
