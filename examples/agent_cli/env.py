"""The calculator agent as a subprocess in the bwrap sandbox, whose only way out is benchmax's proxy.

``agent.py`` could be any program in any language: it reads the example as JSON on
stdin, calls the model at ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` and prints its
answer. Run it with ``benchmax eval examples/agent_cli``.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from benchmax.agents import AgentEnv
from benchmax.envs import BaseRollout, DatasetSplit, JsonlDataset
from benchmax.rewards import extract_completion_text
from benchmax.sandbox import Mount, SandboxSpec

HERE = Path(__file__).resolve().parent

# agent.py imports these in its own process: a missing one fails the load here, naming the
# extra that installs it, instead of every rollout as an agent error
for _module in ("openai", "httpx"):
    if importlib.util.find_spec(_module) is None:
        raise ModuleNotFoundError(f"No module named {_module!r} (agent.py imports it)", name=_module)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class AgentCliEnv(AgentEnv):
    command = (sys.executable, str(HERE / "agent.py"))
    sandbox = SandboxSpec(mounts=(Mount(HERE),))
    max_calls = 8

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        numbers = _NUMBER.findall(extract_completion_text(rollout.messages))
        return {"correct": float(bool(numbers) and float(numbers[-1]) == float(rollout.example_args["answer"]))}
