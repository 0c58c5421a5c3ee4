"""Untrusted input never crashes a run: fuzzed datasets, model replies, tool arguments, tool results, rewards.

Each hypothesis example is a whole run (runner, engine, HTTP client, store) over
a batch of generated cases; the scripted server plays each case's model reply
byte for byte. A bad dataset must fail at load time naming ``file:line``; every
other bad input must end its own rollout with a reason from the vocabulary and
an error saying why, while the run completes and its store reads back.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from benchmax import open_run
from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import (
    BaseEnv,
    DatasetError,
    JsonlDataset,
    ListDataset,
    RolloutFailure,
    TerminationReason,
    ToolError,
    check_prompt_messages,
    is_scorable,
)
from benchmax.loading import example_location
from benchmax.runner import RunConfig, arun
from benchmax.store import export_run
from benchmax.testing import ScriptedServer

VOCABULARY = {reason.value for reason in TerminationReason}
FUZZ = settings(
    max_examples=int(os.environ.get("BENCHMAX_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- what the model may send -------------------------------------------------------------------------------------

_text = st.text(max_size=40)
_int64 = st.integers(-(2**63), 2**63 - 1)  # what JSON encoders emit as integers
_huge = st.integers(250_000, 400_000).map(lambda n: "x" * n)
_surrogate = st.sampled_from(["\udc80", "ok \ud800 mid", "\udfff"])
_json_value = st.recursive(
    st.none() | st.booleans() | _int64 | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": value}
    return value


_arguments = st.one_of(
    _json_value.map(lambda value: orjson.dumps(value).decode()),  # valid JSON, often the wrong type
    st.dictionaries(st.sampled_from(["text", "n", "self", "rollout_id"]), _json_value, max_size=3).map(
        lambda value: orjson.dumps(value).decode()
    ),
    _text,  # usually invalid JSON
    st.integers(300, 600).map(lambda depth: orjson.dumps(_nested(depth // 3)).decode()[: depth * 3]),  # cut short
    st.integers(1100, 3000).map(lambda depth: "[" * depth + "]" * depth),  # deeper than any parser allows
    _huge.map(lambda text: orjson.dumps({"text": text}).decode()),
    st.integers(260, 600).map(lambda depth: f"@@deep:{depth}@@"),  # an object nested past orjson's encoder limit
    _json_value,  # arguments that are not a string at all
)
_tool_call = st.one_of(
    st.fixed_dictionaries(
        {
            "id": st.one_of(st.none(), _text, _int64),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["echo", "echo", "nope", "", None, 7]), "arguments": _arguments}
            ),
        }
    ),
    _json_value,  # junk where a call should be
)
_content = st.one_of(
    st.none(),
    _text,
    _huge,
    _int64,
    st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), _json_value), max_size=3),
    st.dictionaries(_text, _json_value, max_size=2),
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "user", None])},
    optional={
        "content": _content,
        "tool_calls": st.one_of(st.none(), st.lists(_tool_call, max_size=3), _json_value),
        "reasoning_content": st.one_of(_text, _huge, _int64),
    },
)
_completion = st.fixed_dictionaries(
    {
        "choices": st.lists(
            st.fixed_dictionaries(
                {"message": _message},
                optional={"finish_reason": st.sampled_from([None, "stop", "length", "tool_calls", 5, ""])},
            ),
            min_size=1,
            max_size=2,
        )
    },
    optional={"usage": st.one_of(st.none(), st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]),
                                                           _json_value))},
)
_broken_completion = st.one_of(
    _json_value,  # no choices at all
    st.fixed_dictionaries({"choices": st.one_of(st.just([]), st.lists(_json_value, max_size=2), _json_value)}),
    st.fixed_dictionaries({"choices": st.just([{"message": None}])}),
)
_DEEP = re.compile(rb'"@@deep:(\d+)@@"')


def _encode(body: Any) -> bytes:
    """``body`` as JSON, with ``"@@deep:N@@"`` placeholders replaced by objects N levels deep."""
    raw = orjson.dumps(body)
    return _DEEP.sub(lambda match: b'{"a":' * int(match[1]) + b"1" + b"}" * int(match[1]), raw)


_INVALID_UTF8 = (
    b'{"choices": [{"message": {"role": "assistant", "content": "bad \xff\xfe bytes"}, "finish_reason": "stop"}]}'
)


def echo_call(arguments: Any, content: str | None = None) -> dict[str, Any]:
    call = {"id": "c0", "type": "function", "function": {"name": "echo", "arguments": arguments}}
    message = {"role": "assistant", "content": content, "tool_calls": [call]}
    return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}


_echo_call = st.builds(echo_call, _arguments, st.one_of(st.none(), _text))
_reply = st.one_of(
    _echo_call.map(_encode),  # the common shape, so tool arguments and tool results get exercised
    _echo_call.map(_encode),
    _completion.map(_encode),
    _broken_completion.map(lambda body: orjson.dumps(body)),
    st.just(_INVALID_UTF8),
    st.binary(max_size=64),
)

# --- what env code may produce -----------------------------------------------------------------------------------


class _Unprintable:
    def __repr__(self) -> str:
        return "<unprintable>"

    def __str__(self) -> str:
        raise RuntimeError("no str")


_tool_result = st.one_of(
    _json_value,
    _huge,
    _surrogate,
    st.binary(max_size=16),
    st.just(_nested(400)),
    st.just(float("nan")),
    st.just(_Unprintable()),
    st.sampled_from(["raise:ToolError", "raise:ValueError", "raise:RolloutFailure", "raise:surrogate"]),
)
_reward = st.one_of(
    st.sampled_from([float("nan"), float("inf"), -float("inf"), None, "1.0", True, 1, [1.0], b"1"]),
    st.dictionaries(
        st.one_of(_text, _int64, st.none()),
        st.one_of(
            st.floats(),
            st.integers(-(10**400), 10**400),
            _text,
            st.none(),
            st.just([1.0]),
            st.just(_Unprintable()),
        ),
        max_size=3,
    ),
    _json_value,
)


@dataclass(frozen=True)
class Case:
    reply: bytes
    tool_result: Any
    reward: Any


class HostileEnv(BaseEnv):
    """Plays each case: the env's tool returns (or raises) the case's result, scoring returns its reward."""

    max_turns = 2
    max_tool_calls = 4

    def __init__(self, cases: list[Case]) -> None:
        super().__init__()
        self.cases = cases
        self.open = 0

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(
            [{"prompt_messages": [{"role": "user", "content": f"case {index}"}], "case": index}
             for index in range(len(self.cases))]
        )

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        result = self._case(rollout_id).tool_result
        if isinstance(result, str) and result.startswith("raise:"):
            kind = result.split(":", 1)[1]
            if kind == "ToolError":
                raise ToolError(f"bad call {tool_args!r:.100}")
            if kind == "RolloutFailure":
                raise RolloutFailure("sandbox_lost", "the sandbox went away")
            if kind == "surrogate":
                raise ValueError("bad byte \udc80 in output")
            raise ValueError("tool blew up")
        return result

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1

    async def compute_reward(self, rollout):
        return self.cases[rollout.example_args["case"]].reward

    def _case(self, rollout_id: str) -> Case:
        return self._by_rollout[rollout_id]

    _by_rollout: dict[str, Case] = {}


def _policy(cases_by_prompt: dict[str, Case]):
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        if any(message.get("role") == "tool" for message in messages):
            return {"content": "done"}
        return {"status": 200, "body": cases_by_prompt[messages[0]["content"]].reply}

    return answer


@pytest.fixture(scope="module")
def hostile_server():
    table: dict[str, Case] = {}
    with ScriptedServer(policy=_policy(table), keep_requests=0) as server:
        yield server, table


_CONFIG = EngineConfig(
    request_timeout=10,
    tool_timeout=5,
    max_content_chars=2_000,
    max_tool_result_chars=1_000,
    retry=RetryPolicy(max_attempts=2, backoff_initial=0.001, backoff_max=0.002),
)


_OK = _encode(echo_call("{}"))
# Inputs that once crashed a run or were blamed on the wrong party; kept as fixed examples.
_KNOWN = [
    Case(_encode(echo_call("@@deep:300@@")), "ok", {"r": 1.0}),  # object args past orjson's encoder limit
    Case(_OK, "bad \udc80 bytes", {"r": 1.0}),  # a lone surrogate in a tool result
    Case(_OK, "raise:surrogate", {"r": 1.0}),  # ... and in a tool's exception message
    Case(_OK, _Unprintable(), {"r": 1.0}),  # a tool result whose str() raises
    Case(_OK, _nested(400), {"r": 1.0}),  # a tool result nested past orjson's encoder limit
    Case(_OK, "ok", {"r": 10**400}),  # a reward too large for a float
    Case(_OK, "ok", {"bad \udc80 name": 1.0}),  # a reward name that cannot be stored as UTF-8
    Case(_INVALID_UTF8, "ok", {"r": 1.0}),  # a reply that is not UTF-8
    Case(_encode(echo_call("[" * 3000 + "]" * 3000)), "ok", {"r": 1.0}),  # arguments deeper than the parser allows
]


@FUZZ
@example(cases=_KNOWN)
@given(cases=st.lists(st.builds(Case, _reply, _tool_result, _reward), min_size=1, max_size=6))
async def test_hostile_model_replies_tool_calls_tool_results_and_rewards_end_single_rollouts_never_the_run(
    hostile_server, cases
):
    server, table = hostile_server
    table.clear()
    table.update({f"case {index}": case for index, case in enumerate(cases)})
    env = HostileEnv(cases)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        config = RunConfig(
            env="hostile", base_url=server.base_url, model="scripted", concurrency=8, run_dir=run_dir, engine=_CONFIG
        )
        # Tools find their case by rollout id: the runner names rollouts "<split>/<example id>#<sample>".
        examples = await env.create_dataset("eval", Path(tmp))
        HostileEnv._by_rollout = {f"eval/{example.id}#0": cases[index] for index, example in enumerate(examples)}

        result = await arun(config, env=env)

        assert env.open == 0
        with open_run(run_dir) as run:
            assert run.meta["status"] == "completed"
            records = list(run.rollouts())
            export_run(run, Path(tmp) / "export.jsonl")
    assert result.new_rollouts == len(cases) == len(records) == len({record.rollout_id for record in records})
    for record in records:
        reason, error = record.termination_reason, record.error
        passed_through = any(f'"finish_reason":"{reason}"'.encode() in case.reply for case in cases)
        assert reason in VOCABULARY or reason == "sandbox_lost" or passed_through, reason
        assert reason != TerminationReason.CONTEXT_ERROR, f"a hostile input was blamed on rollout_context: {error}"
        if not is_scorable(reason):
            assert error and error.strip(), f"{reason} without an error message"
            assert not record.raw_rewards
        for message in record.messages:
            content = message.get("content")
            if isinstance(content, str):
                assert len(content) <= 3_000, "a size bound was not applied"
        rewards = record.raw_rewards
        assert all(isinstance(value, float) and math.isfinite(value) for value in rewards.values())


# --- datasets -----------------------------------------------------------------------------------------------------

_good_row = st.builds(
    lambda text, extra: {"prompt_messages": [{"role": "user", "content": text}], **extra},
    _text,
    st.dictionaries(st.sampled_from(["answer", "meta", "n"]), _json_value, max_size=2),
)
_line = st.one_of(
    _good_row.map(orjson.dumps),
    _json_value.map(orjson.dumps),  # a JSON value that is not a usable row
    st.binary(max_size=40).filter(lambda raw: b"\n" not in raw),
    st.just(b'{"prompt_messages": [{"role": "user", "content": "bad \xff"}]}'),
    st.integers(300, 1200).map(lambda depth: orjson.dumps({"prompt_messages": [{"role": "user",
                                                                                "content": _nested(depth // 4)}]})
                                if depth < 1000 else b"[" * depth + b"]" * depth),
    st.builds(lambda role, content: orjson.dumps({"prompt_messages": [{"role": role, "content": content}]}),
              _json_value, _json_value),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_line, min_size=1, max_size=8))
def test_a_hostile_dataset_file_loads_or_fails_with_an_error_naming_file_and_line(lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "eval.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        try:
            dataset = JsonlDataset(path)
        except DatasetError as exc:
            message = str(exc)
            assert message.startswith(f"{path}:"), message
            line = int(message[len(str(path)) + 1 :].split(":", 1)[0])
            assert 1 <= line <= len(lines)
            return
    assert len(dataset) <= len(lines)
    for index, item in enumerate(dataset):
        orjson.dumps(item.payload)
        where = example_location(dataset, "eval", index)
        assert where.startswith(f"{path}:"), where
        try:
            check_prompt_messages(item.payload, where=where)
        except DatasetError as exc:
            assert str(exc).startswith(f"{where}: "), str(exc)
        else:
            assert item.payload["prompt_messages"]
