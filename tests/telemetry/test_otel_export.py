"""Rollouts as OpenTelemetry traces, end to end: ``benchmax eval`` in a real subprocess against the
scripted model server, exporting over OTLP/HTTP to a real receiver on loopback (issue #34.5).

The env has a tool, a reward and a group reward, so each rollout's trace holds every kind of span.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from receiver import OtlpReceiver, Span
from runkit import cli_command, write_split

from benchmax import open_run
from benchmax.testing import free_port

ENV = '''
from benchmax.envs import BaseEnv, JsonlDataset


class AddEnv(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
        return [{"type": "function", "function": {"name": "add", "parameters": schema}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        return str(args["a"] + args["b"])

    async def compute_reward(self, rollout):
        answer = rollout.messages[-1]["content"]
        return {"correct": float(answer == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts):
        return [{"rank": 0.5} for _ in rollouts]
'''

SECRET = "SECRET-PROMPT-TEXT"
SCRIPT = [{"tool_calls": [{"id": "call_add", "name": "add", "arguments": {"a": 1, "b": 2}}]}, {"content": "3"}]


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "BENCHMAX_TEST_"))}
    env.update({"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def _eval(tmp_path: Path, server, *extra: str, env: dict[str, str] | None = None, examples: int = 2):
    (tmp_path / "env.py").write_text(ENV)
    rows = [
        {
            "prompt_messages": [{"role": "user", "content": f"{SECRET} {number}\n#script: {json.dumps(SCRIPT)}"}],
            "answer": "3",
        }
        for number in range(examples)
    ]
    write_split(tmp_path / "data", rows)
    run_dir = tmp_path / "run"
    result = subprocess.run(
        cli_command(
            "eval", f"{tmp_path / 'env.py'}:AddEnv", "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--model", "scripted", "--run-dir", run_dir, "--no-progress", *extra,
        ),
        env=env or _env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    return result, run_dir


def _stored_trace_ids(run_dir: Path) -> dict[str, str | None]:
    with open_run(run_dir) as run:
        return {record.rollout_id: record.trace_id for record in run.rollouts()}


def _by_name(spans: list[Span]) -> dict[str, list[Span]]:
    found: dict[str, list[Span]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def _check_tree(receiver: OtlpReceiver, server, run_dir: Path) -> dict[str, list[Span]]:
    traces = receiver.traces()
    stored = _stored_trace_ids(run_dir)
    assert len(traces) == len(stored) == 2, "one trace per rollout"
    assert set(traces) == set(stored.values()), "the store keeps each rollout's exported trace id"
    for trace_id, spans in traces.items():
        names = _by_name(spans)
        assert sorted(names) == sorted(
            ["rollout", "rollout_context enter", "rollout_context exit", "chat scripted", "execute_tool add",
             "compute_reward", "compute_group_rewards"]
        )  # fmt: skip
        (root,) = names["rollout"]
        assert root.parent_id == "" and root.service == "benchmax"
        assert stored.get(root.attributes["benchmax.rollout.id"]) == trace_id
        assert root.attributes["benchmax.split"] == "eval"
        assert root.attributes["benchmax.termination_reason"] == "finished"
        assert root.attributes["benchmax.reward.correct"] == 1.0
        assert root.attributes["benchmax.reward.rank"] == 0.5
        for name in ("rollout_context enter", "rollout_context exit", "chat scripted", "execute_tool add",
                     "compute_reward", "compute_group_rewards"):  # fmt: skip
            assert all(span.parent_id == root.span_id for span in names[name]), name
        first, second = names["chat scripted"]
        for call in (first, second):
            assert call.kind == 3  # SPAN_KIND_CLIENT
            assert call.attributes["gen_ai.operation.name"] == "chat"
            assert call.attributes["gen_ai.request.model"] == "scripted"
            assert call.attributes["gen_ai.response.model"] == "scripted"
            assert call.attributes["gen_ai.usage.input_tokens"] > 0
            assert call.attributes["gen_ai.usage.output_tokens"] > 0
            assert call.attributes["server.address"] == "127.0.0.1"
            assert call.attributes["server.port"] == server.port
        assert sorted(call.attributes["gen_ai.response.finish_reasons"] for call in (first, second)) == [
            ("stop",),
            ("tool_calls",),
        ]
        (tool,) = names["execute_tool add"]
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.name"] == "add"
        assert tool.attributes["gen_ai.tool.call.id"] == "call_add"
    return {trace_id: spans for trace_id, spans in traces.items()}


def _all_text(spans: list[Span]) -> str:
    return json.dumps([span.attributes for span in spans], default=str)


def test_each_rollout_is_one_trace_with_its_stages_as_spans_and_no_prompt_text(tmp_path, server, receiver):
    result, run_dir = _eval(tmp_path, server, "--otel-endpoint", receiver.url)
    assert result.returncode == 0, result.stdout
    _check_tree(receiver, server, run_dir)
    assert SECRET not in _all_text(receiver.spans)
    assert "gen_ai.input.messages" not in _all_text(receiver.spans)


def test_the_content_flag_puts_prompts_completions_and_tool_io_on_the_spans(tmp_path, server, receiver):
    result, run_dir = _eval(tmp_path, server, "--otel-endpoint", f"{receiver.url}/v1/traces", "--otel-content")
    assert result.returncode == 0, result.stdout
    _check_tree(receiver, server, run_dir)
    calls = [span for span in receiver.spans if span.name == "chat scripted"]
    assert all(SECRET in span.attributes["gen_ai.input.messages"] for span in calls)
    assert any('"3"' in span.attributes["gen_ai.output.messages"] for span in calls)
    outputs = [json.loads(span.attributes["gen_ai.output.messages"]) for span in calls]
    assert all([message["role"] for message in output] == ["assistant"] for output in outputs), outputs
    tools = [span for span in receiver.spans if span.name == "execute_tool add"]
    assert all(span.attributes["gen_ai.tool.call.result"] == "3" for span in tools)
    assert all(json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2} for span in tools)


def test_the_standard_variables_configure_export_and_headers_reach_only_the_receiver(tmp_path, server, receiver):
    key = "sk-otel-header-secret"
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_EXPORTER_OTLP_HEADERS=f"x-api-key={key}")
    result, run_dir = _eval(tmp_path, server, env=env)
    assert result.returncode == 0, result.stdout
    _check_tree(receiver, server, run_dir)
    assert all(headers.get("x-api-key") == key for headers in receiver.headers)
    assert key not in result.stdout
    assert not [path for path in run_dir.rglob("*") if path.is_file() and key.encode() in path.read_bytes()]


@pytest.mark.parametrize("switch", ["OTEL_SDK_DISABLED", "off"])
def test_no_traces_without_an_endpoint_or_with_the_sdk_disabled(tmp_path, server, receiver, switch):
    if switch == "off":
        result, run_dir = _eval(tmp_path, server)
    else:
        result, run_dir = _eval(tmp_path, server, "--otel-endpoint", receiver.url, env=_env(OTEL_SDK_DISABLED="true"))
    assert result.returncode == 0, result.stdout
    assert receiver.requests == 0
    assert set(_stored_trace_ids(run_dir).values()) == {None}


def test_a_receiver_that_is_down_neither_fails_nor_stalls_the_run_and_is_said_once(tmp_path, server):
    down = f"http://127.0.0.1:{free_port()}"
    result, run_dir = _eval(
        tmp_path, server, "--otel-endpoint", down, env=_env(OTEL_EXPORTER_OTLP_TIMEOUT="1"), examples=6
    )
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("could not export traces") == 1, result.stdout
    assert len(_stored_trace_ids(run_dir)) == 6


OFF_PROBE = """
import sys
import benchmax
from benchmax import telemetry
result = benchmax.evaluate(sys.argv[1], base_url=sys.argv[2], model="scripted", data_dir=sys.argv[3],
                           run_dir=sys.argv[4])
print("sdk loaded:", any(name.startswith("opentelemetry.sdk") for name in sys.modules))
print("tracer:", telemetry.tracer())
print("traced:", result.stats.rollouts)
"""


def test_tracing_off_loads_no_sdk_and_leaves_the_instrumentation_a_none_check(tmp_path, server):
    (tmp_path / "env.py").write_text(ENV)
    write_split(tmp_path / "data", [{"prompt_messages": [{"role": "user", "content": f"#script: {json.dumps(SCRIPT)}"}],
                                     "answer": "3"}])  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", OFF_PROBE, f"{tmp_path / 'env.py'}:AddEnv", server.base_url, tmp_path / "data",
         tmp_path / "run"],
        env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sdk loaded: False" in result.stdout
    assert "tracer: None" in result.stdout
