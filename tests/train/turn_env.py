"""An env that answers every reply and scores each turn, whatever the policy writes."""

from __future__ import annotations

import zlib

from benchmax.envs import BaseEnv, EnvResponse, ListDataset


class TurnCreditEnv(BaseEnv):
    """Two model turns: the env rewards the first (``step`` 1.0) and not the second, then ends
    the episode; the outcome is a fixed function of the rollout id (0 or 1), so most groups are live."""

    max_turns = 2

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [{"prompt_messages": [{"role": "user", "content": f"count to {word}"}]} for word in ("two", "three")]
        return ListDataset(rows)

    async def env_response(self, rollout):
        turn = len(rollout.turns) - 1
        return EnvResponse(["go on"], rewards={"step": 1.0 if turn == 0 else 0.0}, done=turn == 1)

    async def compute_reward(self, rollout):
        return {"score": float(zlib.crc32(rollout.rollout_id.encode()) % 2)}
