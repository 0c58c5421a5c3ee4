"""An env with two row types, as a mixture yields them: each example names its env.

``math`` rows score ``exact``, ``code`` rows score ``tests_passed``; neither env
ever emits the other's component. Scores are set by the sibling's index, so
every figure of a step is known whatever the tiny policy writes.
"""

from __future__ import annotations

import re

from benchmax.envs import BaseEnv, Example


def _sibling(rollout_id: str) -> int:
    return int(re.search(r"(\d+)$", rollout_id)[1])  # "<group>#1", "probe-1"


class MixedEnv(BaseEnv):
    """Three examples: ``math/a`` (exact = sibling % 2: live), ``code/b`` (tests_passed =
    0.5 x (sibling % 2): live) and ``code/flat`` (tests_passed = 1.0 on every sibling: a dead
    group). The eval split has one example of each env."""

    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [
            Example(
                "math/a",
                {"prompt_messages": [{"role": "user", "content": "what is two plus two"}], "kind": "math"},
                env="math",
            ),
            Example(
                "code/b", {"prompt_messages": [{"role": "user", "content": "write add"}], "kind": "code"}, env="code"
            ),
            Example(
                "code/flat", {"prompt_messages": [{"role": "user", "content": "write sub"}], "kind": "flat"}, env="code"
            ),
        ]
        if split == "eval":
            rows = rows[:2]
        return rows[:max_examples] if max_examples else rows

    async def compute_reward(self, rollout):
        kind = rollout.example_args["kind"]
        odd = float(_sibling(rollout.rollout_id) % 2)
        if kind == "math":
            return {"exact": odd}
        if kind == "code":
            return {"tests_passed": 0.5 * odd}
        return {"tests_passed": 1.0}
