"""Each env turn (``env_response``) is a span of its rollout's trace, against the real OTLP receiver."""

from __future__ import annotations

import orjson
from test_otel_export import _by_name

from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, EnvResponse, Example, ListDataset, RolloutRequest
from benchmax.telemetry import TelemetrySettings, start_telemetry, stop_telemetry


class GameEnv(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def env_response(self, rollout):
        turn = len(rollout.turns) - 1
        if turn == 1:
            raise ValueError("the board is broken")
        return EnvResponse(["higher"], rewards={"closer": 0.5}, info="too low")

    async def compute_reward(self, rollout):
        return {"turns": float(len(rollout.turns))}


async def test_each_env_turn_is_a_span_with_its_reward_and_a_failing_one_is_marked(receiver, server):
    session = start_telemetry(TelemetrySettings(endpoint=receiver.url, content=True))
    steps = orjson.dumps([{"content": "10"}, {"content": "20"}, {"content": "30"}]).decode()
    example = Example("e0", {"prompt_messages": [{"role": "user", "content": f"guess\n#script: {steps}"}]})
    engine = Engine(GameEnv(), EngineConfig())
    try:
        result = await engine.run_group([RolloutRequest("r0", example, "scripted", server.base_url)])
    finally:
        await engine.aclose()
        stop_telemetry(session)
    (outcome,) = result.outcomes
    assert outcome.termination_reason == "env_response_error"
    (spans,) = receiver.traces().values()
    turns = sorted(_by_name(spans)["env_response"], key=lambda span: span.attributes["benchmax.env_turn.index"])
    assert [span.attributes["benchmax.env_turn.index"] for span in turns] == [0, 1]
    first, second = turns
    assert first.attributes["benchmax.env_turn.done"] is False
    assert first.attributes["benchmax.env_turn.messages"] == 1
    assert first.attributes["benchmax.reward.closer"] == 0.5
    assert first.attributes["benchmax.env_turn.observation"] == "higher"
    (root,) = [span for span in spans if span.name == "rollout"]
    assert first.parent_id == root.span_id == second.parent_id
    assert second.status_code == 2  # ERROR: the hook failed inside this span
    assert second.attributes["error.type"] == "RolloutFailure"
    assert "benchmax.env_turn.done" not in second.attributes
