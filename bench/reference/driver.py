"""Drive benchmax 0.2.5 (PyPI) through the same scenario and print one result line.

Runs in the reference venv that ``bench/reference/setup.sh`` builds (Python 3.12);
``bench/`` must be on ``PYTHONPATH`` for the shared harness, which ``run.py`` sets:

    PYTHONPATH=bench "$(bash bench/reference/setup.sh)" bench/reference/driver.py \\
        --base-url http://127.0.0.1:8000/v1 --in-flight 64

0.2.5 has no runner or store: ``Environment.run_group`` is its public way to run a
group, so the harness's closed loop keeps ``in_flight / group_size`` groups going
and nothing is written to disk (which favours the reference).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

import _harness

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Dataset,
    Example,
    RolloutRequest,
    StaticBearerAuth,
    canonical_example_id,
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


class AddEnv(BaseEnv):
    """The scenario of ``bench/scenario.py``, written against 0.2.5's API."""

    max_turns = 4

    def __init__(self, examples: int) -> None:
        super().__init__()
        self.examples = examples

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None) -> Dataset:
        count = self.examples if max_examples is None else min(self.examples, max_examples)
        items = []
        for index in range(count):
            a, b = index, 1000 + 7 * index
            payload = {
                "prompt_messages": [
                    {"role": "user", "content": f"What is {a} + {b}? Use the add tool."}
                ],
                "answer": a + b,
            }
            items.append(Example(canonical_example_id(payload), payload))
        return Dataset(items)

    async def list_tools(self) -> list[dict[str, Any]]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return tool_args["a"] + tool_args["b"]

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        last = rollout.messages[-1]
        answer = last.get("content") if last.get("role") == "assistant" else ""
        return {"correct": float(str(answer or "").strip() == str(rollout.example_args["answer"]))}


async def _main(args: argparse.Namespace) -> dict[str, object]:
    groups = args.rollouts // args.group_size
    env = AddEnv(examples=groups)
    dataset = list(await env.create_dataset("eval", Path.cwd(), max_examples=groups))
    auth = StaticBearerAuth("fake-key")
    recorder = _harness.Recorder(in_flight=args.in_flight)

    async def run_group(index: int) -> list[str]:
        example = dataset[index]
        requests = [
            RolloutRequest(f"eval/{example.id}#{n}", example, "fake", args.base_url, auth, "eval")
            for n in range(args.group_size)
        ]
        try:
            outcomes = await env.run_group(requests)
        except Exception as exc:
            return [type(exc).__name__] * args.group_size
        return [
            "ok"
            if o.termination_reason == "finished" and o.rewards.get("correct") == 1.0
            else (o.termination_reason if o.termination_reason != "finished" else "wrong")
            for o in outcomes.values()
        ]

    workload = _harness.closed_loop(
        run_group,
        recorder,
        groups=groups,
        concurrent_groups=max(1, args.in_flight // args.group_size),
    )
    return await _harness.measure(recorder, workload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--in-flight", type=int, default=64, help="rollouts in flight")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=1024)
    args = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(_main(args))
    result.update(impl="reference", path="run_group", wall_s=round(time.perf_counter() - started, 2))
    _harness.emit(result)
    os._exit(0)


if __name__ == "__main__":
    main()
