"""A model client of one's own (a trainer's in-process policy) evaluated through the runner like any model."""

from __future__ import annotations

import asyncio

import pytest

from benchmax import open_run
from benchmax.client import ChatResult, ClientPool
from benchmax.envs import BaseEnv, ListDataset, Usage
from benchmax.rewards import extract_completion_text
from benchmax.runner import RunConfig, arun


class EchoEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [{"prompt_messages": [{"role": "user", "content": word}], "answer": word} for word in ("a", "b")]
        return ListDataset(rows)

    async def compute_reward(self, rollout):
        return {"correct": float(extract_completion_text(rollout.messages) == rollout.example_args["answer"])}


class EchoClient:
    """Answers every request with its last message: no HTTP, no server."""

    def __init__(self) -> None:
        self.requests = 0
        self.closed = False

    async def chat(self, body, *, rollout_id=None, auth=None):
        self.requests += 1
        return ChatResult({"role": "assistant", "content": body["messages"][-1]["content"]}, "stop", Usage(1, 1))

    async def aclose(self):
        self.closed = True


def test_a_registered_client_needs_no_preflight_and_its_rollouts_are_stored(tmp_path):
    client = EchoClient()
    clients = ClientPool()
    clients.register("inprocess://echo", client)
    config = RunConfig(
        env="echo", base_url="inprocess://echo", group_size=2, split="eval", run_dir=tmp_path / "run"
    )
    result = asyncio.run(arun(config, env=EchoEnv(), clients=clients))
    assert client.requests == 4 and client.closed
    assert result.stats.rollouts == 4 and result.stats.components["correct"].mean == 1.0
    with open_run(tmp_path / "run") as run:
        assert run.meta["base_url"] == "inprocess://echo" and run.meta["model"] == "policy"


def test_a_client_pool_of_ones_own_runs_only_on_the_local_executor(tmp_path):
    config = RunConfig(env="echo", base_url="inprocess://echo", executor="ray", run_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="local executor"):
        asyncio.run(arun(config, env=EchoEnv(), clients=ClientPool()))
