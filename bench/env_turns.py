"""Driver CPU of an env turn beside a tool turn, in one run.

Rollouts of N model turns, N = 2 and 3, driven two ways:

* ``tool``: every turn but the last calls a tool (``step``), its result goes back,
  the last answers;
* ``env``: every turn answers and ``env_response`` answers it (an observation and a
  turn reward); after the last it ends the episode (``done``).

One more turn costs one model request plus one tool call (``tool``) or one env turn
(``env``): the figure is that marginal driver CPU (``time.process_time``) per turn,
``cost(N=3) - cost(N=2)`` per rollout, for each, and their ratio. Everything runs
through ``Engine.run_group`` against the scripted model server in a process of its own
(its CPU does not count), the four kinds alternating, several repeats, medians.

    python bench/env_turns.py --rollouts 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, EnvResponse, Example, ListDataset, RolloutRequest
from benchmax.testing import ServerProcess

TOOL = [{"type": "function", "function": {"name": "step", "parameters": {"type": "object"}}}]


class ToolEnv(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return TOOL

    async def run_tool(self, rollout_id, tool_name, **args):
        return "higher"

    async def compute_reward(self, rollout):
        return {"done": 1.0}


class TurnEnv(ToolEnv):
    async def env_response(self, rollout):
        if len(rollout.turns) < int(rollout.example_args["turns"]):
            return EnvResponse(["higher"], rewards={"step": 0.0})
        return EnvResponse(rewards={"step": 1.0}, done=True)


def example(steps: list[dict[str, Any]]) -> Example:
    payload = {"prompt_messages": [{"role": "user", "content": f"guess\n#script: {json.dumps(steps)}"}]}
    return Example("e", {**payload, "turns": len(steps)})


ANSWER = {"content": "42"}
CALL = {"tool_calls": [{"name": "step"}]}
SCRIPTS = {
    "tool-2": (ToolEnv, example([CALL, ANSWER])),
    "tool-3": (ToolEnv, example([CALL, CALL, ANSWER])),
    "env-2": (TurnEnv, example([ANSWER, ANSWER])),
    "env-3": (TurnEnv, example([ANSWER, ANSWER, ANSWER])),
}


async def measure(kind: str, base_url: str, rollouts: int, in_flight: int) -> float:
    env_class, item = SCRIPTS[kind]
    engine = Engine(env_class(), EngineConfig())
    await engine.start()
    group = 8
    slots = asyncio.Semaphore(in_flight // group)
    count = 0

    async def one(number: int) -> None:
        nonlocal count
        async with slots:
            requests = [RolloutRequest(f"{kind}-{number}-{k}", item, "scripted", base_url) for k in range(group)]
            result = await engine.run_group(requests)
            assert all(outcome.termination_reason == "finished" for outcome in result.outcomes), result.outcomes[0]
            count += len(result.outcomes)

    await asyncio.gather(*(one(n) for n in range(8)))  # warm: connections, caches
    start = time.process_time()
    await asyncio.gather(*(one(n) for n in range(rollouts // group)))
    spent = time.process_time() - start
    await engine.aclose()
    return spent / (count - 64) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {kind: [] for kind in SCRIPTS}
    with ServerProcess() as server:
        for repeat in range(args.repeats):
            order = list(SCRIPTS) if repeat % 2 == 0 else list(reversed(SCRIPTS))
            for kind in order:
                figures[kind].append(asyncio.run(measure(kind, server.base_url, args.rollouts, args.in_flight)))
    median = {kind: statistics.median(values) for kind, values in figures.items()}
    print(f"{args.rollouts} rollouts per run, {args.repeats} repeats, {args.in_flight} in flight")
    print("driver CPU per rollout (median, runs in brackets):")
    for kind, values in figures.items():
        print(f"  {kind:7} {median[kind]:8.1f} us   ({', '.join(f'{v:.1f}' for v in values)})")
    tool = median["tool-3"] - median["tool-2"]
    env = median["env-3"] - median["env-2"]
    print(f"one more turn: model request + tool call {tool:.1f} us, model request + env turn {env:.1f} us")
    print(f"env turn / tool turn: {env / tool:.3f}")


if __name__ == "__main__":
    main()
