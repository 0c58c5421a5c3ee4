"""The embedded SmolLM2 server: real weights, real llama.cpp, real subprocesses.

CI installs the ``local`` extra, so a missing llama-cpp-python fails these tests
with the install command instead of skipping them. One server is shared by the
module's request tests; the lifecycle tests start their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmax.client import HttpModelClient
from benchmax.engine import Engine
from benchmax.envs import (
    BaseEnv,
    Example,
    ListDataset,
    RolloutRequest,
    SamplingParams,
    TerminationReason,
    canonical_example_id,
)
from benchmax.local import (
    EMBEDDED_MODEL_NAME,
    PORTABLE_REBUILD,
    EmbeddedModel,
    EmbeddedModelError,
    check_installed,
    find_embedded_model,
)

SRC = Path(__file__).resolve().parents[2] / "src"
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def _require_local_extra() -> None:
    try:
        check_installed()
    except EmbeddedModelError as error:
        pytest.fail(f"the 'local' extra is required for these tests: {error}", pytrace=False)


def _gone(pid: int, within: float = 10.0) -> bool:
    """True once ``pid`` has exited (a zombie awaiting its reaper counts as exited)."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and stat.read_text().rpartition(")")[2].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedModel]:
    _require_local_extra()
    with EmbeddedModel(tmp_path_factory.mktemp("embedded"), default_max_tokens=24) as running:
        yield running


@pytest.fixture
def local_extra() -> None:
    _require_local_extra()


def test_the_weights_ship_in_the_installed_wheel(local_extra):
    path = find_embedded_model()
    assert path.suffix == ".gguf"
    assert path.read_bytes()[:4] == b"GGUF"


async def test_a_chat_request_through_the_http_client_gets_an_answer(model):
    client = HttpModelClient(model.base_url)
    try:
        result = await client.chat(
            {
                "model": model.model,
                "messages": [{"role": "user", "content": "Say hello in one word."}],
                "max_tokens": 16,
                "temperature": 0.0,
            }
        )
    finally:
        await client.aclose()
    assert model.model == EMBEDDED_MODEL_NAME
    assert isinstance(result.message.get("content"), str) and result.message["content"].strip()
    assert result.finish_reason in ("stop", "length")
    assert result.usage.prompt_tokens > 0
    assert 0 < result.usage.completion_tokens <= 16


async def test_tools_without_tool_choice_yield_a_bounded_tool_call(model):
    # OpenAI's default with tools is "auto"; llama-cpp-python's would drop the
    # tools. And max_tokens must bound the tool arguments too.
    client = HttpModelClient(model.base_url)
    try:
        result = await client.chat(
            {
                "model": model.model,
                "messages": [{"role": "user", "content": "What is 37 * 91? Use the calculator."}],
                "tools": [CALCULATOR],
                "max_tokens": 24,
                "temperature": 0.0,
            }
        )
    finally:
        await client.aclose()
    calls = result.message.get("tool_calls")
    assert calls and calls[0]["function"]["name"] == "calculator"
    assert result.usage.completion_tokens <= 24 * 2


def test_the_server_in_use_passed_its_self_test_on_a_portable_build(model):
    # The fixture's server answered a forced multi-token tool call before it was handed out
    # (llama.cpp's batched prompt path). The build CI makes is portable: a build tuned to its
    # build machine's AVX-512/AMX crashes on machines that advertise but do not run them.
    info = model.system_info or ""
    assert "AVX2 = 1" in info or "NEON = 1" in info, info
    assert "AMX" not in info and "AVX512 = 1" not in info, (
        f"llama-cpp-python was built for this machine's CPU ({model.system_info}); rebuild it: {PORTABLE_REBUILD}"
    )
    assert model.plain_kernels is False


async def test_a_long_prompt_gets_a_multi_token_tool_call(model):
    client = HttpModelClient(model.base_url)
    question = " ".join(f"Item {index} costs {index * 3} dollars." for index in range(40))
    try:
        result = await client.chat(
            {
                "model": model.model,
                "messages": [{"role": "user", "content": f"{question} Multiply 37 by 91 with the tool."}],
                "tools": [MULTIPLY],
                "tool_choice": {"type": "function", "function": {"name": "multiply"}},
                "max_tokens": 32,
                "temperature": 0.0,
            }
        )
    finally:
        await client.aclose()
    assert result.usage.prompt_tokens > 200
    assert result.usage.completion_tokens > 1
    call = result.message["tool_calls"][0]["function"]
    arguments = json.loads(call["arguments"])
    assert call["name"] == "multiply" and isinstance(arguments, dict), call
    assert all(isinstance(arguments.get(name), int) for name in ("a", "b")), call


def test_a_build_that_crashes_on_batched_prompts_is_restarted_with_plain_kernels(local_extra, tmp_path, caplog):
    # The drill dies by SIGSEGV on every chat request unless the extra buffer types are off,
    # as the AMX kernels of a build tuned to another CPU do.
    with EmbeddedModel(tmp_path, crash_drill="unless-plain") as running:
        assert running.plain_kernels is True
        assert b"--no-extra-buffers" in Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")
    warning = " ".join(record.getMessage() for record in caplog.records if record.levelname == "WARNING")
    assert "killed by SIGSEGV (signal 11) during its self-test" in warning
    assert PORTABLE_REBUILD in warning


def test_a_server_that_always_crashes_says_what_died_and_how_to_fix_it(local_extra, tmp_path):
    with pytest.raises(EmbeddedModelError) as caught:
        EmbeddedModel(tmp_path, crash_drill="every-chat").start()
    message = str(caught.value)
    assert "was killed by SIGSEGV (signal 11) during its self-test" in message
    assert "again with its AMX/repacked kernels off" in message
    assert str(tmp_path / "embedded-model.log") in message
    assert "crash drill 'every-chat': SIGSEGV on chat request 1" in message, "the log tail is quoted"
    assert PORTABLE_REBUILD in message and "--base-url" in message
    assert "llama.cpp build: CPU :" in message


async def test_a_request_without_max_tokens_stops_at_the_default_cap(model):
    client = HttpModelClient(model.base_url)
    try:
        result = await client.chat(
            {
                "model": model.model,
                "messages": [{"role": "user", "content": "Write a long essay about the history of Rome."}],
                "temperature": 0.0,
            }
        )
    finally:
        await client.aclose()
    assert result.finish_reason == "length"
    assert result.usage.completion_tokens == model.default_max_tokens == 24


class _CalculatorEnv(BaseEnv):
    """Forces the calculator on every turn, so the second request carries the
    first turn's assistant tool call and the tool's answer."""

    max_turns = 2

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [CALCULATOR]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        return "3367"

    async def compute_reward(self, rollout):
        return {"tool_messages": float(sum(m["role"] == "tool" for m in rollout.messages))}


async def test_the_engine_runs_a_multi_turn_tool_rollout_against_the_model(model):
    payload = {"prompt_messages": [{"role": "user", "content": "Compute 37 * 91."}]}
    request = RolloutRequest(
        rollout_id="r0",
        example=Example(canonical_example_id(payload), payload),
        model=model.model,
        base_url=model.base_url,
        sampling=SamplingParams(
            temperature=0.0,
            max_tokens=32,
            extra_body={"tool_choice": {"type": "function", "function": {"name": "calculator"}}},
        ),
    )
    engine = Engine(_CalculatorEnv())
    try:
        outcome = await engine.run_rollout(request)
    finally:
        await engine.aclose()
    assert outcome.error is None
    assert outcome.termination_reason == TerminationReason.MAX_TURNS_EXCEEDED
    assert len(outcome.turns) == 2
    assert outcome.rewards["tool_messages"] >= 1.0


def test_an_exception_inside_the_block_stops_the_server(local_extra, tmp_path, capfd):
    with pytest.raises(RuntimeError, match="boom"), EmbeddedModel(tmp_path) as running:
        pid = running.pid
        assert running.running
        raise RuntimeError("boom")
    assert pid is not None and _gone(pid)
    assert not running.running
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "Application startup complete" in (tmp_path / "embedded-model.log").read_text()


async def test_the_async_context_manager_serves_and_then_stops(local_extra, tmp_path):
    async with EmbeddedModel(tmp_path, n_threads=1) as running:
        pid = running.pid
        client = HttpModelClient(running.base_url)
        try:
            result = await client.chat(
                {"model": running.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
            )
        finally:
            await client.aclose()
        assert result.usage.completion_tokens > 0
    assert pid is not None and _gone(pid)
    with pytest.raises(EmbeddedModelError, match="not started"):
        _ = running.base_url


def test_the_server_exits_when_its_parent_is_killed(local_extra, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        from benchmax.local import EmbeddedModel
        model = EmbeddedModel({str(tmp_path)!r}).start()
        print(model.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    server_pid = None
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        assert line.strip().isdigit(), "the parent did not report the server's pid"
        server_pid = int(line)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _gone(server_pid, within=10.0), "the model server outlived a kill -9 of its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout:
            parent.stdout.close()
        if server_pid is not None and not _gone(server_pid, within=0):
            os.kill(server_pid, signal.SIGKILL)


def test_a_server_that_dies_while_starting_reports_its_log(local_extra, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    with pytest.raises(EmbeddedModelError) as caught:
        EmbeddedModel(tmp_path, model_path=broken, startup_timeout=60).start()
    message = str(caught.value)
    assert "exited with code" in message
    assert str(tmp_path / "embedded-model.log") in message
    assert "broken.gguf" in message


def test_without_the_wheel_the_error_names_the_install_command():
    # A real interpreter whose path lacks site-packages: the wheel is truly absent.
    code = textwrap.dedent(
        f"""
        import sys
        sys.path[:] = [{str(SRC)!r}] + [p for p in sys.path if "-packages" not in p]
        from benchmax.local import EmbeddedModelError, find_embedded_model
        try:
            find_embedded_model()
        except EmbeddedModelError as error:
            print(error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'benchmax[local]'" in result.stdout
    assert "--base-url" in result.stdout


def test_ctrl_c_while_starting_stops_the_server(local_extra, tmp_path):
    script = textwrap.dedent(
        f"""
        import os, signal, threading
        from benchmax.local import EmbeddedModel
        model = EmbeddedModel({str(tmp_path)!r})
        def interrupt():
            while model.pid is None:
                pass
            print(model.pid, flush=True)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            model.start()
        except KeyboardInterrupt:
            print("interrupted", model.running, flush=True)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = result.stdout.split()
    assert lines[1:] == ["interrupted", "False"], result.stdout + result.stderr
    assert _gone(int(lines[0]))


def test_asyncio_cancellation_while_starting_stops_the_server(local_extra, tmp_path):
    async def scenario() -> int | None:
        model = EmbeddedModel(tmp_path)
        task = asyncio.create_task(model.astart())
        while model.pid is None:
            await asyncio.sleep(0.01)
        pid = model.pid
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not model.running
        return pid

    pid = asyncio.run(scenario())
    assert pid is not None and _gone(pid)
