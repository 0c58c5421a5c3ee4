"""An env whose groups are dead or live by construction, whatever the policy writes."""

from __future__ import annotations

from benchmax.envs import BaseEnv, ListDataset


class SignalEnv(BaseEnv):
    """Examples flagged ``flat`` score 1.0 on every sibling (a dead group); the others
    score the sibling's index mod 2 (always live). Single-turn, no tools."""

    max_turns = 1

    def __init__(self, *, flat: tuple[int, ...] = (0, 2), size: int = 4) -> None:
        super().__init__()
        self.flat = flat
        self.size = size

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [
            {"prompt_messages": [{"role": "user", "content": f"what is two plus {word}"}], "flat": index in self.flat}
            for index, word in enumerate(["three", "five", "seven", "two", "one", "four"][: self.size])
        ]
        return ListDataset(rows[:max_examples] if max_examples else rows)

    async def compute_reward(self, rollout):
        if rollout.example_args["flat"]:
            return {"score": 1.0}
        return {"score": float(int(rollout.rollout_id.rsplit("#", 1)[1]) % 2)}
