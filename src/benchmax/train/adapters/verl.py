"""verl: a benchmax env's ``compute_reward`` as verl's custom reward function.

verl generates single-turn responses itself and scores them with
``custom_reward_function.path``/``name``, a plain function
``compute_score(data_source, solution_str, ground_truth, extra_info)``. The
env's dataset becomes verl parquet rows (:func:`to_verl_row`) whose
``extra_info`` carries the example payload, so the reward sees the same
``rollout.example_args`` as in ``benchmax eval``. verl wants one float: the
components are combined with ``weights`` (missing ones count as 0.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmax.aio import LoopThread
from benchmax.envs import BaseEnv, BaseRollout, Example, TerminationReason


def to_verl_row(example: Example, *, data_source: str = "benchmax") -> dict[str, Any]:
    """One verl RL dataset row: chat prompt plus the payload for the reward."""
    payload = dict(example.payload)
    return {
        "data_source": data_source,
        "prompt": payload["prompt_messages"],
        "reward_model": {"style": "rule", "ground_truth": ""},
        "extra_info": {"example_id": example.id, "payload": payload},
    }


class VerlRewardAdapter:
    """Callable with verl's ``compute_score`` signature, scoring with a benchmax env.

    In the module verl loads: ``compute_score = VerlRewardAdapter(MyEnv(), weights={...})``.
    """

    def __init__(self, env: BaseEnv, *, weights: Mapping[str, float] | None = None) -> None:
        self.env = env
        self.weights = dict(weights or {})
        self._loop = LoopThread(name="benchmax-verl-reward")

    def __call__(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: Any = None,
        extra_info: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, float]:
        payload = dict((extra_info or {}).get("payload") or {})
        prompt = list(payload.get("prompt_messages") or [])
        rollout = BaseRollout(
            rollout_id=str((extra_info or {}).get("example_id", "verl")),
            messages=[*prompt, {"role": "assistant", "content": solution_str}],
            example_args={key: value for key, value in payload.items() if key != "prompt_messages"},
            split="train",
            termination_reason=TerminationReason.FINISHED,
        )
        rewards = self._loop.run(self.env.compute_reward(rollout)) or {}
        score = sum(float(value) * self.weights.get(name, 1.0) for name, value in rewards.items())
        return {"score": score, **{name: float(value) for name, value in rewards.items()}}

    def close(self) -> None:
        self._loop.close()
