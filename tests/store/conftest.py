"""Fixtures: a scripted model server answering by each prompt's ``#answers`` line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))

from runkit import answers_policy

from benchmax.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy=answers_policy) as running:
        yield running


@pytest.fixture
def make_run():
    """``make_run(run_dir, {example_id: [rewards, ...]})``: a stored run of hand-written rollouts.

    An empty rewards dict is a ``model_error`` failure; every example is one group
    in batch 0, and the batch is zero-filled.
    """
    from benchmax.envs import Example, RolloutOutcome
    from benchmax.store import GroupWrite, RunWriter

    def make(run_dir: Path, groups: dict[str, list[dict[str, float]]]) -> Path:
        writer = RunWriter.create(run_dir, {"started_at": 0.0, "ended_at": 1.0})
        writer.add_examples(
            "eval", [Example(name, {"prompt_messages": [{"role": "user", "content": name}]}) for name in groups]
        )
        for index, (name, rollouts) in enumerate(groups.items()):
            outcomes = tuple(
                RolloutOutcome(
                    rewards=rewards,
                    termination_reason="finished" if rewards else "model_error",
                    error=None if rewards else "HTTP 503",
                    rollout_id=f"eval/{name}#{sample}",
                    example_id=name,
                    split="eval",
                    messages=[{"role": "user", "content": name}],
                )
                for sample, rewards in enumerate(rollouts)
            )
            writer.write_group(GroupWrite(f"eval/{name}", name, index, 0, outcomes, tuple(range(len(outcomes)))))
        writer.fill_batch(0)
        writer.close()
        return run_dir

    return make
