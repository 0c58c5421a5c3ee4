"""Traces on the other paths a rollout takes: a reply from the response cache, ``benchmax rescore``
(in this process and in worker processes), ``benchmax train`` on the tiny model, and an agent's
calls through the recording proxy; each against the real OTLP receiver on loopback (issue #34.5).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from receiver import OtlpReceiver, Span
from runkit import cli_command
from test_otel_export import _by_name, _env, _eval, _stored_trace_ids

from benchmax.client import ClientPool
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import BaseEnv, Example, RolloutRequest
from benchmax.proxy import RecordingProxy
from benchmax.telemetry import CACHE_HIT, TelemetrySettings, start_telemetry, stop_telemetry, tracer
from benchmax.testing import ScriptedServer

TRAIN_ENV = Path(__file__).parents[1] / "train" / "calculator_env.py"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _run(*args: object, env: dict[str, str] | None = None, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args), env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def _roots(receiver: OtlpReceiver) -> dict[str, Span]:
    """Each trace's root span, by trace id (exactly one per trace)."""
    roots: dict[str, Span] = {}
    for trace_id, spans in receiver.traces().items():
        (root,) = [span for span in spans if span.name == "rollout"]
        assert root.parent_id == ""
        roots[trace_id] = root
    return roots


def test_a_reply_from_the_response_cache_is_a_model_call_span_marked_as_a_hit(tmp_path, server, receiver):
    cache = tmp_path / "cache"
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    first, _ = _eval(tmp_path / "first", server, "--cache", cache)
    assert first.returncode == 0, first.stdout
    sent = server.counts["requests"]
    second, run_dir = _eval(tmp_path / "second", server, "--cache", cache, "--otel-endpoint", receiver.url)
    assert second.returncode == 0, second.stdout
    assert server.counts["requests"] == sent, "the second run is answered from the cache"
    roots = _roots(receiver)
    assert set(roots) == set(_stored_trace_ids(run_dir).values()) and len(roots) == 2
    for trace_id, spans in receiver.traces().items():
        calls = _by_name(spans)["chat scripted"]
        assert len(calls) == 2
        for call in calls:
            assert call.parent_id == roots[trace_id].span_id
            assert call.attributes[CACHE_HIT] is True
            assert call.attributes["gen_ai.operation.name"] == "chat"
            assert call.attributes["gen_ai.usage.output_tokens"] > 0
            assert call.attributes["gen_ai.response.model"] == "scripted", "the cache keeps the reply's model"
            assert "server.address" not in call.attributes and "server.port" not in call.attributes


def test_a_sent_call_is_not_marked_as_a_cache_hit(tmp_path, server, receiver):
    result, _ = _eval(tmp_path, server, "--cache", tmp_path / "cache", "--otel-endpoint", receiver.url)
    assert result.returncode == 0, result.stdout
    calls = [span for span in receiver.spans if span.name == "chat scripted"]
    assert len(calls) == 4 and not any(CACHE_HIT in call.attributes for call in calls)
    assert all(call.attributes["server.port"] == server.port for call in calls)


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "worker-processes"])
def test_rescored_rollouts_are_traces_and_the_new_run_keeps_their_ids(tmp_path, server, receiver, workers):
    result, source = _eval(tmp_path, server)
    assert result.returncode == 0, result.stdout
    target = tmp_path / "rescored"
    done = _run("rescore", source, "--run-dir", target, "--workers", str(workers), "--otel-endpoint", receiver.url)
    assert done.returncode == 0, done.stdout
    stored = _stored_trace_ids(target)
    roots = _roots(receiver)
    assert len(roots) == len(stored) == 2
    assert {trace_id: root.attributes["benchmax.rollout.id"] for trace_id, root in roots.items()} == {
        trace_id: rollout_id for rollout_id, trace_id in stored.items()
    }, "the rescored run stores the traces its scoring made"
    assert set(_stored_trace_ids(source).values()) == {None}, "the source run is not touched"
    for trace_id, spans in receiver.traces().items():
        names = _by_name(spans)
        assert {"rollout_context enter", "rollout_context exit", "compute_reward"} <= set(names)
        assert "chat scripted" not in names, "rescoring makes no policy call"
        assert roots[trace_id].attributes["benchmax.reward.correct"] == 1.0


def test_training_rollouts_on_the_in_process_policy_are_traced(tmp_path, receiver):
    import torch

    from benchmax.train.tiny import build_tiny_model

    torch.set_num_threads(1)
    model = build_tiny_model(tmp_path / "tiny-model", bias=0, chat_template=CHAT_TEMPLATE)
    run_dir = tmp_path / "train"
    done = _run(
        "train", f"{TRAIN_ENV}:CalculatorEnv", "--model", model, "--run-dir", run_dir, "--max-steps", "1",
        "--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "6", "--threads", "1",
        "--otel-endpoint", receiver.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]
    stored = _stored_trace_ids(run_dir)
    assert stored and None not in stored.values(), "every training rollout is stored with its trace"
    roots = _roots(receiver)
    assert set(stored.values()) <= set(roots), "the stored trace ids are the exported ones"
    for rollout_id, trace_id in stored.items():
        root = roots[trace_id]
        assert root.attributes["benchmax.rollout.id"] == rollout_id
        assert root.attributes["benchmax.split"] == "train"
        calls = [span for span in receiver.traces()[trace_id] if span.kind == 3]
        assert calls, "each policy turn is a model-call span"
        for call in calls:
            assert call.parent_id == root.span_id
            assert call.attributes["gen_ai.usage.output_tokens"] > 0
            assert "server.address" not in call.attributes, "the in-process policy is not a server"


AGENT_TURNS = [
    {"tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "5"},
]


class _ProxiedAgentEnv(BaseEnv):
    """An agent env as benchmax.agents will make one: the rollout takes a lease on the recording
    proxy and the agent calls the model through it with the ``openai`` SDK, in its own tasks."""

    max_turns = 1

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy
        self.answers: list[str] = []

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None) -> list[Example]:
        return []

    async def run_rollout(self, request: RolloutRequest) -> Any:
        async with self.proxy.lease(request.rollout_id) as lease:
            agent = openai.AsyncOpenAI(
                base_url=lease.base_url, api_key=lease.api_key, http_client=httpx.AsyncClient(trust_env=False)
            )
            try:
                messages: list[dict[str, Any]] = [
                    {"role": "system", "content": f"#script: {orjson.dumps(AGENT_TURNS).decode()}"},
                    {"role": "user", "content": "2+3?"},
                ]
                first = await agent.chat.completions.create(model="any", messages=messages)
                (call,) = first.choices[0].message.tool_calls or ()
                messages.append({"role": "assistant", "content": None, "tool_calls": [call.model_dump()]})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
                streamed = await agent.chat.completions.create(model="any", messages=messages, stream=True)
                self.answers.append("".join([chunk.choices[0].delta.content or "" async for chunk in streamed]))
            finally:
                await agent.close()
        return await super().run_rollout(request)

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        return {"answered": 1.0}


async def test_an_agents_calls_through_the_recording_proxy_are_spans_of_its_rollouts_trace(receiver):
    session = start_telemetry(TelemetrySettings(endpoint=receiver.url))
    try:
        assert tracer() is not None
        with ScriptedServer() as server:
            pool = ClientPool()
            async with RecordingProxy(pool, model="agent-model", base_url=server.base_url) as proxy:
                env = _ProxiedAgentEnv(proxy)
                engine = Engine(env, EngineConfig())
                try:
                    example = Example("e0", {"prompt_messages": [{"role": "user", "content": "hi"}]})
                    requests = [  # siblings: their agents call the proxy at the same time
                        RolloutRequest(
                            rollout_id=f"agent#{index}",
                            example=example,
                            model="scripted",
                            base_url=server.base_url,
                        )
                        for index in range(2)
                    ]
                    result = await engine.run_group(requests)
                finally:
                    await engine.aclose()
                    await pool.aclose()
    finally:
        stop_telemetry(session)
    assert env.answers == ["5", "5"]
    by_rollout = {outcome.rollout_id: outcome.trace_id for outcome in result.outcomes}
    roots = _roots(receiver)
    assert {root.attributes["benchmax.rollout.id"]: trace_id for trace_id, root in roots.items()} == by_rollout
    for trace_id, spans in receiver.traces().items():
        proxied = _by_name(spans)["chat agent-model"]
        assert len(proxied) == 2, "both of the agent's calls, the streamed one too, are in its rollout's trace"
        assert all(span.parent_id == roots[trace_id].span_id and span.kind == 3 for span in proxied)
        assert all(span.attributes["server.port"] == server.port for span in proxied)
        assert sorted(span.attributes["gen_ai.response.finish_reasons"] for span in proxied) == [
            ("stop",),
            ("tool_calls",),
        ]
        assert len(_by_name(spans)["chat scripted"]) == 1, "and the standard loop's own turn"


def test_the_train_and_rescore_commands_offer_the_telemetry_options():
    for command in ("train", "rescore"):
        shown = subprocess.run(
            [sys.executable, "-m", "benchmax.cli", command, "--help"], env=_env(), capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert "--otel-endpoint" in shown.stdout and "--otel-content" in shown.stdout, command
