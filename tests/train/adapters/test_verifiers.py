"""The verifiers adapter: verifiers' own loader builds the env from a plugin module
(``vf_lookup``), ``env.serving()`` brings up its interception server, and
``env.run_slot`` plays an episode; benchmax's engine talks to a scripted
OpenAI-compatible server through that interception."""

from __future__ import annotations

import orjson
import pytest
import verifiers.v1 as vf
from adapter_env import LookupEnv, RankedLookupEnv
from verifiers.v1.clients import EvalClientConfig, ModelContext
from verifiers.v1.envs.single_agent import SingleAgentEnvConfig
from verifiers.v1.runtimes import SubprocessConfig

from benchmax.envs import ListDataset
from benchmax.testing import ScriptedServer
from benchmax.train.adapters.verifiers import register_env

CALL = {"tool_calls": [{"name": "lookup", "arguments": {"key": "France"}}]}


class ScriptedLookupEnv(LookupEnv):
    """LookupEnv whose rows carry scripts for the scripted server."""

    def __init__(self, *steps_per_row: list[dict], broken: bool = False) -> None:
        super().__init__()
        self.rows = steps_per_row
        self.broken = broken

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(
            [
                {
                    "prompt_messages": [
                        {"role": "user", "content": f"capital of France\n#script: {orjson.dumps(steps).decode()}"}
                    ],
                    "answer": "Paris",
                    **({"broken": True} if self.broken else {}),
                }
                for steps in self.rows
            ]
        )


@pytest.fixture
def server():
    with ScriptedServer() as server:
        yield server


async def play(server: ScriptedServer, name: str, **taskset: object) -> tuple[vf.Env, list]:
    config = SingleAgentEnvConfig.model_validate(
        {"taskset": {"id": "vf_lookup", "env": name, **taskset}, "agent": {"runtime": SubprocessConfig()}}
    )
    env = vf.load_environment(config)
    tasks = list(env.taskset)
    client = EvalClientConfig(base_url=server.base_url, api_key_var="BENCHMAX_TEST_KEY")
    ctx = ModelContext(model="policy", client=client)
    async with env.serving():
        episodes = [await env.run_slot(slot, ctx) for task in tasks for slot in env.slots(task)]
    return env, episodes


async def test_a_tool_rollout_through_the_interception_records_weighted_components(server):
    lookup = ScriptedLookupEnv([CALL, {"content": "It is Paris."}])
    register_env("vf-lookup", lookup)
    env, (episode,) = await play(server, "vf-lookup", weights={"correct": 2.0, "used_tool": 0.5})
    assert type(env.taskset).__name__ == "BenchmaxTaskset"
    (trace,) = episode.traces
    assert trace.ok, trace.errors
    assert {name: (r.score, r.weight) for name, r in trace.rewards.items()} == {
        "correct": (1.0, 2.0),
        "used_tool": (1.0, 0.5),
    }
    assert trace.reward == 2.5
    assert trace.info["benchmax"]["termination_reason"] == "finished"
    assert any("looked up France" in line for line in trace.info["benchmax"]["logs"])
    assert len(server.requests) == 2
    tool_reply = server.requests[1]["messages"][-1]
    assert (tool_reply["role"], tool_reply["tool_call_id"], tool_reply["content"]) == ("tool", "call_0", "Paris")
    assert lookup.entered == lookup.exited == [trace.id]


async def test_a_failing_context_becomes_a_trace_error_without_rewards(server):
    register_env("vf-broken", ScriptedLookupEnv([{"content": "Paris"}], broken=True))
    _, (episode,) = await play(server, "vf-broken")
    (trace,) = episode.traces
    assert not trace.ok
    assert "context_error" in trace.errors[-1].message
    assert trace.reward == 0.0
    assert trace.info["benchmax"]["rewards"] == {}


def test_an_env_with_group_rewards_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="RankedLookupEnv implements compute_group_rewards, but verifiers"):
        register_env("vf-ranked", RankedLookupEnv())
