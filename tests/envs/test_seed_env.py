"""The spec's own ``MyEnv`` code block, verbatim, runs on benchmax end to end.

The block is kept here character for character (``row_to_example=...`` and
``return [...]`` included) and loaded from a file the way a user's env.py is.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson

from benchmax.engine import Engine
from benchmax.envs import BaseEnv, RolloutRequest

SEED_SOURCE = '''\
from contextlib import asynccontextmanager
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, Tool
from benchmax.rewards import extract_completion_text

class MyEnv(BaseEnv):
    max_turns = 1  # bounds the chat loop; max_tool_calls separately bounds tool usage

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        """required. map a split ("train" or "eval") to a finite dataset. every
        example payload contains `prompt_messages`; other fields are opaque data
        your reward can read later. `max_examples` lets validation and capped
        runs load a small slice."""
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=..., max_examples=max_examples
        )

    # implement at least one of the two scoring hooks; when both are present
    # the trainer merges their reward dicts.

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """score one completed rollout."""
        answer = extract_completion_text(rollout.messages)
        return {"correct": float(answer == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts):
        """score a completed sibling group jointly (win-rate, ranking,
        diversity)."""
        ...

    # every hook below is optional; the defaults give a tool-less loop.

    async def list_tools(self) -> list[Tool]:
        """declare OpenAI-compatible tools the model may call. defaults to []."""
        return [...]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args):
        """execute one tool call; the return value is the tool result the
        model sees."""
        ...

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        """acquire per-rollout resources before the model sees the prompt and
        release them afterwards (workspace files, db seed, a sandbox)."""
        yield

    async def aclose(self):
        """close environment-owned shared resources when the environment is
        done."""
'''


def load_seed(tmp_path: Path) -> type[BaseEnv]:
    path = tmp_path / "seed_env.py"
    path.write_text(SEED_SOURCE)
    spec = importlib.util.spec_from_file_location("seed_env", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("seed_env", None)
    spec.loader.exec_module(module)
    return module.MyEnv


def write_rows(path: Path, rows: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def test_seed_block_is_the_spec_text_verbatim():
    assert "row_to_example=..., max_examples=max_examples" in SEED_SOURCE
    assert "return [...]" in SEED_SOURCE
    assert SEED_SOURCE.count("async def ") == 7


async def test_seed_env_scores_correct_and_wrong_answers_through_a_real_server(tmp_path, scripted_server, make_engine):
    my_env = load_seed(tmp_path)
    right = '#script: [{"content": "4"}]'
    wrong = '#script: [{"content": "5"}]'
    write_rows(
        tmp_path / "train.jsonl",
        [
            {"prompt_messages": [{"role": "user", "content": f"2+2?\n{right}"}], "answer": "4"},
            {"prompt_messages": [{"role": "user", "content": f"2+2!\n{wrong}"}], "answer": "4"},
        ],
    )
    env = my_env()
    dataset = await env.create_dataset("train", tmp_path)
    assert len(dataset) == 2
    engine: Engine = make_engine(env)
    rewards = []
    for example in dataset:
        request = RolloutRequest(
            rollout_id=f"seed-{example.id}",
            example=example,
            model="scripted",
            base_url=scripted_server.base_url,
        )
        result = await engine.run_group([request])
        (outcome,) = result.outcomes
        assert outcome.termination_reason == "finished"
        assert outcome.messages[0]["role"] == "user"
        assert outcome.messages[-1]["role"] == "assistant"
        rewards.append(outcome.rewards)
    assert rewards == [{"correct": 1.0}, {"correct": 0.0}]
    assert all("tools" not in body for body in scripted_server.requests)
    await env.aclose()


async def test_seed_env_reads_eval_split_and_honours_max_examples(tmp_path):
    my_env = load_seed(tmp_path)
    rows = [{"prompt_messages": [{"role": "user", "content": f"q{i}"}], "answer": str(i)} for i in range(5)]
    write_rows(tmp_path / "eval.jsonl", rows)
    env = my_env()
    dataset = await env.create_dataset("eval", tmp_path, max_examples=3)
    assert [example.payload["answer"] for example in dataset] == ["0", "1", "2"]


async def test_seed_env_runs_through_the_0_2_run_group_api(tmp_path, scripted_server):
    my_env = load_seed(tmp_path)
    write_rows(
        tmp_path / "train.jsonl",
        [
            {
                "prompt_messages": [{"role": "user", "content": '#script: [{"content": "7"}]'}],
                "answer": "7",
            }
        ],
    )
    env = my_env()
    (example,) = await env.create_dataset("train", tmp_path)
    requests = [RolloutRequest(f"g{i}", example, "scripted", scripted_server.base_url, None, "eval") for i in range(3)]
    try:
        outcomes = await env.run_group(requests)
    finally:
        await env.aclose()
    assert set(outcomes) == {"g0", "g1", "g2"}
    for outcome in outcomes.values():
        assert (outcome.rewards, outcome.termination_reason, outcome.error) == (
            {"correct": 1.0},
            "finished",
            None,
        )
        assert outcome.split == "eval"
