"""ART (OpenPipe): benchmax rollouts as ``art.Trajectory`` / ``art.TrajectoryGroup``.

ART serves the policy behind an OpenAI-compatible endpoint
(``model.inference_base_url``) and trains on trajectories a user's rollout
function returns. benchmax's engine speaks exactly that endpoint, so a rollout
here is an ``Engine.run_group`` against it: ``rollout_context``, tools,
termination reasons, group rewards and log capture behave as in ``eval``.

ART trains only on assistant turns given as ``Choice`` objects with token
logprobs; a turn without them is context. The engine keeps each turn's
``token_ids`` and logprobs when the server returns them (vLLM's
``return_token_ids``, which the default sampling asks for), and they become the
``token_id:N`` logprob tokens ART's tokenizer reads back.

``openpipe-art`` is imported lazily, so this module loads without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchmax.engine import Engine, EngineConfig
from benchmax.envs import (
    BaseEnv,
    DatasetSplit,
    Example,
    RolloutOutcome,
    RolloutRequest,
    SamplingParams,
    StaticBearerAuth,
    Tool,
    TurnRecord,
)
from benchmax.train.adapters._common import components, rollout_id, scalar_reward

if TYPE_CHECKING:
    import art

DEFAULT_SAMPLING = SamplingParams(logprobs=True, extra_body={"return_token_ids": True})
"""Ask the server for what ART trains on: each generated token's id and logprob."""


class UnscorableRollout(RuntimeError):
    """An operational failure (no reward), handed to ART as a group exception."""


def to_trajectory(
    outcome: RolloutOutcome,
    *,
    weights: Mapping[str, float] | None = None,
    tools: Sequence[Tool] | None = None,
) -> art.Trajectory:
    """One settled rollout as an ``art.Trajectory``.

    ``reward`` is the weighted sum of the components; ``metrics`` holds each
    component (0.0 for a weighted one the env did not emit) and ``scored``;
    ``metadata`` the termination reason and ids; ``logs`` the env's captured log
    records, so ART's logging shows them beside the transcript.
    """
    import art

    weights = dict(weights or {})
    rewards = components(outcome, weights)
    return art.Trajectory(
        messages_and_choices=_messages_and_choices(outcome.messages, outcome.turns),
        tools=[dict(tool) for tool in tools] if tools else None,
        reward=scalar_reward(rewards, weights),
        metrics={**rewards, "scored": float(outcome.scored)},
        metadata={
            "termination_reason": outcome.termination_reason,
            "error": outcome.error,
            "rollout_id": outcome.rollout_id,
            "example_id": outcome.example_id,
        },
        logs=[f"{log.level} {log.logger} [{log.phase} turn {log.turn}] {log.message}" for log in outcome.logs],
    )


class ARTRollouts:
    """Runs benchmax groups against an ``art.Model``'s endpoint.

    In an ART training loop::

        rollouts = ARTRollouts(MyEnv(), weights={"correct": 1.0})
        groups = await art.gather_trajectory_groups(
            rollouts.group(model, example, n=8) for example in batch
        )
        await model.train(groups)

    ``drop_unscorable`` turns operational failures into group exceptions (ART
    leaves them out of training) instead of zero-reward trajectories.
    """

    def __init__(
        self,
        env: BaseEnv,
        *,
        weights: Mapping[str, float] | None = None,
        sampling: SamplingParams = DEFAULT_SAMPLING,
        split: DatasetSplit = "train",
        config: EngineConfig | None = None,
        drop_unscorable: bool = False,
    ) -> None:
        self.env = env
        self.weights = dict(weights or {})
        self.sampling = sampling
        self.split: DatasetSplit = split
        self.drop_unscorable = drop_unscorable
        self.engine = Engine(env, config)
        self._tools: list[Tool] | None = None

    async def group(self, model: art.Model, example: Example, *, n: int) -> art.TrajectoryGroup:
        """``n`` siblings of ``example``, group rewards included."""
        import art

        if n < 1:
            raise ValueError(f"a group needs n >= 1 rollouts, got {n}")
        if self._tools is None:
            self._tools = list((await self.engine.start()).values())
        requests = [self._request(model, example) for _ in range(n)]
        result = await self.engine.run_group(requests)
        members: list[art.Trajectory | BaseException] = []
        for outcome in result.outcomes:
            if self.drop_unscorable and not outcome.scored:
                members.append(UnscorableRollout(f"{outcome.termination_reason}: {outcome.error}"))
            else:
                members.append(to_trajectory(outcome, weights=self.weights, tools=self._tools))
        return art.TrajectoryGroup(
            members, logs=[f"{log.level} {log.logger} [group_reward] {log.message}" for log in result.logs]
        )

    async def aclose(self) -> None:
        await self.engine.aclose()

    def _request(self, model: art.Model, example: Example) -> RolloutRequest:
        if not model.inference_base_url:
            raise ValueError(
                f"art.Model {model.name!r} has no inference_base_url: register it with a backend "
                "(await model.register(backend)) or set inference_base_url for an external endpoint"
            )
        key = model.inference_api_key
        return RolloutRequest(
            rollout_id=rollout_id("art", example),
            example=example,
            model=model.get_inference_name(),
            base_url=model.inference_base_url,
            model_auth=StaticBearerAuth(key) if key else None,
            split=self.split,
            sampling=self.sampling,
        )


def _messages_and_choices(messages: Sequence[Mapping[str, Any]], turns: Sequence[TurnRecord]) -> list[Any]:
    """Prompt and tool messages as dicts; each assistant turn as a ``Choice``.

    The engine records one turn per assistant message, in order. A turn whose
    server returned token ids and logprobs of equal length becomes trainable.
    """
    from openai.types.chat.chat_completion import Choice

    items: list[Any] = []
    turn_index = 0
    for message in messages:
        if message.get("role") != "assistant":
            items.append(dict(message))
            continue
        turn = turns[turn_index] if turn_index < len(turns) else None
        turn_index += 1
        ids = turn.completion_token_ids if turn else None
        logprobs = turn.completion_logprobs if turn else None
        if not ids or not logprobs or len(ids) != len(logprobs):
            items.append(dict(message))
            continue
        items.append(
            Choice.model_validate(
                {
                    "index": 0,
                    "finish_reason": _finish_reason(turn.finish_reason if turn else None),
                    "message": {
                        "role": "assistant",
                        "content": message.get("content"),
                        **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
                    },
                    "logprobs": {
                        "content": [
                            {"token": f"token_id:{token}", "logprob": logprob, "bytes": None, "top_logprobs": []}
                            for token, logprob in zip(ids, logprobs, strict=True)
                        ]
                    },
                }
            )
        )
    return items


def _finish_reason(reason: str | None) -> str:
    allowed = {"stop", "length", "tool_calls", "content_filter", "function_call"}
    return reason if reason in allowed else "stop"
