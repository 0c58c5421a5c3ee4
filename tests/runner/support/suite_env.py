"""A test env whose examples belong to two envs, as a mixture's do: ``math`` and ``code``.

Each dataset line names its env (``env``); ``math`` scores ``exact`` (and ``format`` where
the line carries one, so a math batch has a component to fill among math rollouts),
``code`` scores ``tests_passed``. Each example's ``Example.env`` is its line's env, so the
runner and the store see what a mixture hands them, without the mixture itself.
"""

from __future__ import annotations

import json

from benchmax.envs import BaseEnv, Example
from benchmax.rewards import extract_completion_text


class SuiteEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        lines = (base_dir / f"{split}.jsonl").read_text().splitlines()
        examples = []
        for index, line in enumerate(lines[:max_examples]):
            payload = json.loads(line)
            examples.append(Example(f"{payload['env']}/{index}", payload, env=payload["env"]))
        return examples

    async def compute_reward(self, rollout):
        right = float(extract_completion_text(rollout.messages).strip() == rollout.example_args["answer"])
        if rollout.example_args["env"] == "code":
            return {"tests_passed": right}
        rewards = {"exact": right}
        if "format" in rollout.example_args:
            rewards["format"] = float(rollout.example_args["format"])
        return rewards
