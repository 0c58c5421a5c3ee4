"""SkyRL: a benchmax env as a skyrl-gym ``BaseTextEnv``.

SkyRL owns the model loop: its generator renders the chat, generates, and hands
each response to ``env.step(action)`` as text. benchmax's engine owns the env's
loop (``rollout_context``, tool dispatch and budgets, termination reasons,
scoring, log capture). The bridge runs both: each SkyRL env instance starts one
``Engine.run_rollout`` whose model client is not an HTTP endpoint but this
env's ``step``. When the engine asks for a model turn, ``init``/``step`` return
the new messages (the prompt, then tool results) as observations; when the
rollout settles, ``step`` returns ``done=True`` and the weighted reward. So the
env behaves as in ``benchmax eval``; only the generation comes from SkyRL.

Tool calls are read from the response text (Hermes ``<tool_call>`` blocks,
what Qwen-style templates emit). Group rewards are refused: SkyRL scores each
trajectory alone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skyrl_gym import register
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from benchmax.aio import LoopThread
from benchmax.client import ChatResult, ClientPool, ModelError
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import (
    BaseEnv,
    DatasetSplit,
    Example,
    Messages,
    RolloutOutcome,
    RolloutRequest,
    TerminationReason,
    Usage,
)
from benchmax.train._tokens import parse_tool_call_text
from benchmax.train.adapters._common import (
    components,
    example_fields,
    example_from_fields,
    refuse_group_rewards,
    rollout_id,
    scalar_reward,
)

_POLICY_URL = "skyrl://policy"


def to_skyrl_row(example: Example, *, env_class: str = "benchmax", data_source: str = "benchmax") -> dict[str, Any]:
    """One SkyRL dataset row. SkyRL passes every column but ``prompt`` and
    ``env_class`` to the env as ``extras``; ``extra_info`` carries the example."""
    return {
        "data_source": data_source,
        "prompt": [dict(message) for message in example.payload["prompt_messages"]],
        "env_class": env_class,
        "reward_spec": {"method": "benchmax"},
        "extra_info": example_fields(example),
    }


@dataclass(eq=False)
class _Episode:
    """One trajectory's hand-off points between SkyRL's thread and the engine's loop."""

    asks: asyncio.Queue[Messages] = field(default_factory=asyncio.Queue)
    actions: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[RolloutOutcome] | None = None


class _StepClient:
    """The engine's model client: each ``chat`` waits for SkyRL's next action."""

    def __init__(self, episodes: Mapping[str, _Episode]) -> None:
        self._episodes = episodes

    async def chat(self, body: dict[str, Any], *, rollout_id: str | None = None) -> ChatResult:
        episode = self._episodes[rollout_id or ""]
        await episode.asks.put(list(body["messages"]))
        text = await episode.actions.get()
        if text is None:
            raise ModelError(TerminationReason.CANCELLED, "SkyRL closed the env before the rollout ended")
        content, calls = parse_tool_call_text(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return ChatResult(message=message, finish_reason="stop", usage=Usage())

    async def aclose(self) -> None:
        return None


class SkyRLBridge:
    """The benchmax side shared by every SkyRL env instance: env, engine, event loop.

    ``on_outcome`` sees each settled :class:`RolloutOutcome` (transcript, reward
    components, termination reason, captured logs), e.g. to write it to a store.
    """

    def __init__(
        self,
        env: BaseEnv,
        *,
        weights: Mapping[str, float] | None = None,
        split: DatasetSplit = "train",
        config: EngineConfig | None = None,
        on_outcome: Callable[[RolloutOutcome], None] | None = None,
    ) -> None:
        refuse_group_rewards(env, "SkyRL")
        self.env = env
        self.weights = dict(weights or {})
        self.split: DatasetSplit = split
        self.on_outcome = on_outcome
        self._episodes: dict[str, _Episode] = {}
        clients = ClientPool()
        clients.register(_POLICY_URL, _StepClient(self._episodes))
        self.engine = Engine(env, config, clients=clients)
        self._loop = LoopThread(name="benchmax-train-loop")

    def register(self, env_id: str = "benchmax") -> None:
        """Register this bridge with skyrl-gym under ``env_id`` (the rows' ``env_class``)."""
        register(id=env_id, entry_point=functools.partial(BenchmaxTextEnv, bridge=self))

    def close(self) -> None:
        self._loop.run(self.engine.aclose())
        self._loop.close()

    def _run(self, coroutine: Any) -> Any:
        return self._loop.run(coroutine)

    async def _start(self, request: RolloutRequest) -> Messages | RolloutOutcome:
        episode = _Episode()
        self._episodes[request.rollout_id] = episode
        episode.task = asyncio.create_task(self.engine.run_rollout(request))
        return await self._next(request.rollout_id)

    async def _act(self, rollout: str, action: str | None) -> Messages | RolloutOutcome:
        await self._episodes[rollout].actions.put(action)
        return await self._next(rollout)

    async def _next(self, rollout: str) -> Messages | RolloutOutcome:
        """The engine's next model request, or the settled outcome if there is none."""
        episode = self._episodes[rollout]
        assert episode.task is not None
        ask = asyncio.ensure_future(episode.asks.get())
        await asyncio.wait({ask, episode.task}, return_when=asyncio.FIRST_COMPLETED)
        if ask.done():
            return ask.result()
        ask.cancel()
        del self._episodes[rollout]
        outcome = episode.task.result()
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        return outcome


class BenchmaxTextEnv(BaseTextEnv):
    """One SkyRL trajectory driven through benchmax's engine (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None, *, bridge: SkyRLBridge) -> None:
        super().__init__()
        self.bridge = bridge
        info = dict((extras or {}).get("extra_info") or {})
        self.example = example_from_fields(info, where="SkyRL extras['extra_info']")
        self.max_turns = bridge.env.max_turns or 1
        self.rollout_id = rollout_id("skyrl", self.example)
        self.outcome: RolloutOutcome | None = None
        self._seen = 0

    def init(self, prompt: Messages) -> tuple[Messages, dict[str, Any]]:
        request = RolloutRequest(
            rollout_id=self.rollout_id,
            example=self.example,
            model="skyrl-policy",
            base_url=_POLICY_URL,
            split=self.bridge.split,
        )
        first = self.bridge._run(self.bridge._start(request))
        if isinstance(first, RolloutOutcome):
            self.outcome = first
            return prompt, {"rollout_id": self.rollout_id}
        self._seen = len(first)
        return first, {"rollout_id": self.rollout_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        if self.outcome is None:
            reply = self.bridge._run(self.bridge._act(self.rollout_id, action))
            if not isinstance(reply, RolloutOutcome):
                observations = reply[self._seen + 1 :]
                self._seen = len(reply)
                return BaseTextEnvStepOutput(observations=observations, reward=0.0, done=False, metadata={})
            self.outcome = reply
        rewards = components(self.outcome, self.bridge.weights)
        return BaseTextEnvStepOutput(
            observations=[],
            reward=scalar_reward(rewards, self.bridge.weights),
            done=True,
            metadata={
                "rewards": rewards,
                "termination_reason": self.outcome.termination_reason,
                "error": self.outcome.error,
            },
        )

    def get_metrics(self) -> dict[str, Any]:
        if self.outcome is None:
            return {}
        rewards = components(self.outcome, self.bridge.weights)
        return {**rewards, "scored": float(self.outcome.scored)}

    def close(self) -> None:
        """End a trajectory SkyRL stopped early (its own turn or length limit) so the
        rollout's context is exited; the outcome records it as ``cancelled``."""
        if self.outcome is None and self.rollout_id in self.bridge._episodes:
            reply = self.bridge._run(self.bridge._act(self.rollout_id, None))
            self.outcome = reply if isinstance(reply, RolloutOutcome) else None
