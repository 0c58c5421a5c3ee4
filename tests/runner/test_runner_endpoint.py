"""The run's model endpoint: checked before a rollout is spent, supervised while the run goes.

The embedded-model tests run the real llama.cpp server (the ``local`` extra); its crash drills
make the server die by SIGSEGV, as a llama.cpp build tuned to another CPU does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runkit import ENV_SPEC, cli_env, row, run_cli, write_split

from benchmax.engine import EngineConfig
from benchmax.local import PORTABLE_REBUILD, EmbeddedModelError, check_installed
from benchmax.runner import EMBEDDED, EndpointError, RunConfig, arun
from benchmax.store import open_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def local_extra() -> None:
    try:
        check_installed()
    except EmbeddedModelError as error:
        pytest.fail(f"the 'local' extra is required for these tests: {error}", pytrace=False)


async def test_an_unreachable_base_url_stops_the_run_before_any_rollout(tmp_path):
    write_split(tmp_path / "data", [row("1")])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url="http://127.0.0.1:9/v1", run_dir=tmp_path / "run"
    )
    with pytest.raises(EndpointError, match=r"cannot reach the model server at http://127.0.0.1:9/v1 .*is it running"):
        await arun(config)
    assert not (tmp_path / "run" / "run.sqlite").exists()


async def test_a_url_without_v1_is_detected_and_the_v1_url_suggested(tmp_path, server):
    write_split(tmp_path / "data", [row("1")])
    root = server.base_url.removesuffix("/v1")
    config = RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=root, run_dir=tmp_path / "run")
    with pytest.raises(EndpointError, match=rf"try --base-url {root}/v1"):
        await arun(config)
    assert server.counts["requests"] == 0 and not (tmp_path / "run" / "run.sqlite").exists()


async def test_without_model_the_one_model_the_server_lists_is_used(tmp_path, server):
    write_split(tmp_path / "data", [row("1")])
    result = await arun(
        RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, run_dir=tmp_path / "run")
    )
    assert result.verdict.ok
    assert {body["model"] for body in server.requests} == {"scripted"}
    with open_run(tmp_path / "run") as run:
        assert run.meta["model"] == "scripted"


async def test_an_embedded_server_that_dies_mid_run_is_restarted_and_no_rollout_is_lost(
    local_extra, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("BENCHMAX_EMBEDDED_CRASH_DRILL", "third-chat")
    write_split(tmp_path / "data", [row(str(i), f"Say the number {i}.") for i in range(4)])
    config = RunConfig(
        env=ENV_SPEC, data_dir=tmp_path / "data", base_url=EMBEDDED, run_dir=tmp_path / "run", concurrency=1,
        max_failure_rate=1.0,
    )  # fmt: skip
    result = await arun(config)
    assert result.stats.rollouts == 4
    assert "model_error" not in result.stats.reasons, result.stats.reasons
    (outage,) = result.outages
    assert outage.cause.startswith("the embedded model server was killed by SIGSEGV")
    assert outage.ended_at is not None and not outage.failed
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "was killed by SIGSEGV (signal 11); last lines of" in said, "the death is said at once, with its log"
    assert "crash drill 'third-chat'" in said
    assert "restarting the embedded model server (1/3)" in said
    with open_run(tmp_path / "run") as run:
        (stored,) = run.meta["outages"]
        assert stored["held"] >= 1 and stored["ended_at"] is not None


def test_an_embedded_server_that_crashes_on_every_request_exits_1_naming_the_fix(local_extra, tmp_path):
    write_split(tmp_path / "data", [row("1")])
    result = run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--run-dir", tmp_path / "run", "--no-progress",
        env=cli_env(BENCHMAX_EMBEDDED_CRASH_DRILL="every-chat"), timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    out = " ".join(result.stdout.split())
    assert "was killed by SIGSEGV (signal 11) during its self-test" in out
    assert "crash drill 'every-chat': SIGSEGV on chat request 1" in out, "the server's last log lines are quoted"
    assert " ".join(PORTABLE_REBUILD.split()) in out
    assert "no rollout was run" in out
    assert not (tmp_path / "run" / "run.sqlite").exists(), "no run is left behind"


def _prompt_log(run_dir: Path) -> list[tuple[int, int]]:
    """``(prompt tokens, tokens already in the KV cache)`` per completion, from the server's log."""
    found = re.findall(
        r"benchmax: prompt tokens (\d+), in the KV cache (\d+)", (run_dir / "embedded-model.log").read_text()
    )
    return [(int(total), int(held)) for total, held in found]


async def test_the_embedded_model_evaluates_only_what_each_turn_adds(local_extra, tmp_path, monkeypatch):
    # a rollout's turns back to back: each prompt extends the one before, held in llama.cpp's KV cache;
    # interleaved, a turn followed another rollout's prompt and re-read its own conversation
    monkeypatch.setattr("benchmax.runner._endpoint.EMBEDDED_TURN_HOLD", 60.0)  # the engine frees it per rollout
    config = RunConfig(
        env=str(EXAMPLES / "math"), env_kwargs={"max_turns": 3}, max_examples=2, group_size=2,
        base_url=EMBEDDED, run_dir=tmp_path / "run", max_failure_rate=1.0,
    )  # fmt: skip
    result = await arun(config)
    assert result.stats.rollouts == 4
    completions = _prompt_log(tmp_path / "run")[1:]  # after the server's self-test
    assert len(completions) >= 8, completions
    evaluated = [total - held for total, held in completions]
    # the first prompt of the run follows the self-test's; every later one, a rollout's next turn
    # or the next rollout (the same system prompt and tools), adds a tool result or a question
    assert sum(1 for count in evaluated if count > 40) <= 1, completions


class _LoadSeen:
    """An observer that keeps what the run says of its rollouts in flight and waiting for the model."""

    def __init__(self) -> None:
        self.loads: list[tuple[int, int]] = []

    def on_start(self, **_: object) -> None: ...

    def on_group(self, result: object, *, env: str | None = None) -> None: ...

    def on_outage(self, *_: object) -> None: ...

    def on_load(self, *, in_flight: int, waiting: int) -> None:
        self.loads.append((in_flight, waiting))


async def test_the_observer_hears_how_many_rollouts_are_in_flight_and_wait_for_the_model(tmp_path, server):
    # one request at a time (as the embedded model is served), each taking 2 s: the others wait
    write_split(tmp_path / "data", [row(str(i), f"q{i}", sleep=2.0) for i in range(4)])
    clients = EngineConfig().client_pool()
    clients.http(server.base_url).keep_turns_together(hold=60.0)
    seen = _LoadSeen()
    config = RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, run_dir=tmp_path / "run")
    result = await arun(config, observer=seen, clients=clients)
    assert result.verdict.ok
    assert seen.loads, "heard every second while the run went"
    assert max(in_flight for in_flight, _ in seen.loads) == 4
    assert max(waiting for _, waiting in seen.loads) >= 1
    assert all(waiting < max(in_flight, 1) for in_flight, waiting in seen.loads), seen.loads
