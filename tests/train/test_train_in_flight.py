"""Training keeps at most ``concurrency`` rollouts in flight, counted where requests arrive.

The policy runs in process; the reward asks a judge on the scripted server once per rollout
(after the rollout's turns, inside it), so the judge's most requests at once bound the bridge's
rollouts in flight from below.
"""

from __future__ import annotations

import pytest
import torch

from benchmax.engine import Engine
from benchmax.envs import BaseEnv, Example, ListDataset, SamplingParams
from benchmax.errors import BenchmaxError
from benchmax.rewards import Judge
from benchmax.testing import ScriptedServer
from benchmax.train import POLICY_URL, TrainConfig
from benchmax.train._policy import InProcessPolicy
from benchmax.train._rollouts import RolloutBridge

GROUP_SIZE = 2


def _examples() -> list[Example]:
    return [Example(f"e{index}", {"prompt_messages": [{"role": "user", "content": f"q{index}"}]}) for index in range(4)]


class JudgedOnce(BaseEnv):
    max_turns = 1

    def __init__(self, judge_url: str) -> None:
        super().__init__()
        self.judge = Judge(model="judge", base_url=judge_url, max_retries=0)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(_examples())

    async def compute_reward(self, rollout):
        payload, _ = await self.judge.request_json('Answer with JSON: {"score": 1}', request_id="grade")
        return {"judge": float(payload["score"])}

    async def aclose(self):
        await self.judge.aclose()


@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_the_bridge_keeps_at_most_concurrency_rollouts_in_flight(tiny, concurrency):
    model, tokenizer = tiny
    torch.manual_seed(0)
    with ScriptedServer(policy=lambda body: {"content": '{"score": 1}', "sleep": 0.05}) as judge:
        env = JudgedOnce(judge.base_url)
        policy = InProcessPolicy(model, tokenizer)
        engine = Engine(env)
        engine.clients.register(POLICY_URL, policy)
        examples = _examples()
        bridge = RolloutBridge(
            engine=engine,
            examples={example.id: example for example in examples},
            tokenizer=tokenizer,
            base_url=POLICY_URL,
            sampling=SamplingParams(temperature=1.0, max_tokens=4),
            policy=policy,
            concurrency=concurrency,
        )
        try:
            prompts = [example.id for example in examples for _ in range(GROUP_SIZE)]
            batch = bridge.generate(prompts, group_size=GROUP_SIZE, step=0)
        finally:
            bridge.loop.run(engine.aclose())
            bridge.loop.run(env.aclose())
            bridge.loop.close()
            policy.close()
    assert judge.counts["requests"] == len(examples) * GROUP_SIZE
    assert [rewards["judge"] for rewards in batch["benchmax_rewards"]] == [1.0] * len(examples) * GROUP_SIZE
    # a group takes its siblings' slots together: a group larger than the bound runs alone
    assert 1 <= judge.max_in_flight <= max(concurrency, GROUP_SIZE)


def test_train_config_refuses_a_concurrency_below_one():
    with pytest.raises(BenchmaxError, match="concurrency must be >= 1"):
        TrainConfig(env="x", concurrency=0)
