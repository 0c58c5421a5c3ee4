"""benchmax 0.2.5's env contract, piece by piece, as env code relies on it.

Each test names one behaviour of 0.2.5 (``/tmp/ref/wheel/benchmax`` is where it
was read; CORE-CHANGES.md gives file and line) that upstream envs or trainers
depend on. The scenario tests show the same behaviours end to end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

ENVS = Path(__file__).resolve().parent / "envs"


def test_rollout_failure_carries_a_termination_reason_and_a_required_message():
    from benchmax.envs import RolloutFailure

    failure = RolloutFailure("sandbox_error", "the sandbox did not start")
    assert isinstance(failure, RuntimeError)
    assert failure.termination_reason == "sandbox_error"
    assert str(failure) == "the sandbox did not start"
    with pytest.raises(TypeError):
        RolloutFailure("sandbox_error")  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        RolloutFailure("sandbox_error", "  ")
    with pytest.raises(ValueError):
        RolloutFailure("finished", "cannot fail as finished")


def test_a_base_rollout_defaults_to_the_train_split_and_is_unscored():
    from benchmax.envs import BaseRollout, RolloutAttempt

    rollout = BaseRollout(rollout_id="r1", termination_reason="finished", messages=[], example_args={})
    assert (rollout.split, rollout.rewards, rollout.error) == ("train", None, None)
    assert isinstance(rollout, RolloutAttempt)


def test_a_rollout_attempt_validates_itself():
    from benchmax.envs import RolloutAttempt

    assert RolloutAttempt(rollout_id="r", termination_reason="tool_error").rewards is None
    with pytest.raises(ValueError):
        RolloutAttempt(rollout_id=" ", termination_reason="finished")
    with pytest.raises(ValueError):
        RolloutAttempt(rollout_id="r", termination_reason="finished", rewards={"x": float("inf")})


def test_static_bearer_auth_from_envs_is_the_auth_class_and_takes_the_token_positionally():
    from benchmax.auth import StaticBearerAuth as AuthClass
    from benchmax.envs import StaticBearerAuth

    auth = StaticBearerAuth("sk-positional")
    assert StaticBearerAuth is AuthClass
    assert auth.token == "sk-positional"


def test_a_request_takes_any_model_auth():
    from benchmax.envs import Example, InjectedAuth, RolloutRequest

    example = Example(id="e1", payload={"prompt_messages": [{"role": "user", "content": "q"}]})
    request = RolloutRequest("r1", example, "m", "http://h/v1", InjectedAuth("policy"))
    assert request.model_auth == InjectedAuth("policy") and request.split == "train"
    with pytest.raises(TypeError):
        RolloutRequest("r1", example, "m", "http://h/v1", "sk-raw")  # type: ignore[arg-type]


def test_max_turns_may_be_set_after_super_init():
    from benchmax.envs import BaseEnv

    class LateLimits(BaseEnv):
        def __init__(self) -> None:
            super().__init__()
            self.max_turns = 2

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            raise NotImplementedError

        async def compute_reward(self, rollout):
            return {"x": 1.0}

    assert LateLimits().max_turns == 2


def test_datasets_are_generic_base_classes(tmp_path):
    from benchmax.envs import Dataset, Example, JsonlDataset, JsonRow

    assert JsonRow == dict[str, Any]

    class Listed(Dataset[JsonRow]):
        def __init__(self, count: int) -> None:
            super().__init__([Example(id=f"e{i}", payload={"i": i}) for i in range(count)])

    listed = Listed(3)
    assert (len(listed), listed[1].payload, [e.id for e in listed]) == (3, {"i": 1}, ["e0", "e1", "e2"])

    class Typed(JsonlDataset[JsonRow]):
        pass

    (tmp_path / "d.jsonl").write_text('{"q": 1}\n\n{"q": 1}\n')
    rows = Typed(tmp_path / "d.jsonl", row_to_example=lambda row: Example(id="same", payload=row))
    assert len(rows) == 2  # repeated rows load; the runner tells repeats apart
    assert Example[JsonRow] is not None  # upstream annotations subscript it at import time


def test_jsonl_loading_errors_keep_their_types_and_locations(tmp_path):
    from benchmax.envs import Example, JsonlDataset

    path = tmp_path / "d.jsonl"
    path.write_text('{"answer": 1}\n{"no_answer": 1}\n')

    def convert(row: dict) -> Example:
        return Example(id=str(row["answer"]), payload=row)

    with pytest.raises(KeyError) as caught:
        JsonlDataset(path, row_to_example=convert)
    assert any("d.jsonl:2" in note for note in getattr(caught.value, "__notes__", []))
    path.write_text("[1]\n")
    with pytest.raises(TypeError, match=r"d\.jsonl:1: .*must be a JSON object"):
        JsonlDataset(path, row_to_example=convert)
    path.write_text("{oops\n")
    with pytest.raises(ValueError, match=r"d\.jsonl:1: invalid JSON"):
        JsonlDataset(path, row_to_example=convert)
    path.write_text('{"answer": 1}\n')
    with pytest.raises(TypeError, match="expected an Example or a payload dict"):
        JsonlDataset(path, row_to_example=lambda row: [row])
    for refused in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_examples must be a positive integer or None"):
            JsonlDataset(path, row_to_example=convert, max_examples=refused)


def test_dataset_paths_stay_inside_the_data_root(tmp_path):
    from benchmax.envs.base import resolve_dataset_path

    assert resolve_dataset_path(tmp_path, "sub/train.jsonl") == (tmp_path / "sub" / "train.jsonl").resolve()
    for escaping in ("../outside.jsonl", "/etc/passwd"):
        with pytest.raises(ValueError):
            resolve_dataset_path(tmp_path, escaping)


def test_example_ids_are_0_2_5s_canonical_hashes():
    from benchmax.envs import canonical_example_id

    # Recorded from benchmax 0.2.5: ids stay comparable with data and runs made there.
    assert (
        canonical_example_id({"prompt_messages": [{"role": "user", "content": "hi"}], "answer": "42"})
        == "08d69535c70381ca78624b09ac1a365c39f956378e16cb2ab9f97639d3d2b5f3"
    )
    assert (
        canonical_example_id({"b": 1.0, "a": [1, 2.5, None, True], "c": "é"})
        == "e36a882454a665ab74d05b42e1c30698a2b7672a18fc4c32d32614e9225dd2e5"
    )
    assert (
        canonical_example_id({"x": -0.0, "y": 3.0})
        == "08b287cb52a3aca4dc91d559818e3c29a0e1835269d126d7dda471e4aa611dce"
    )
    for unusable in ({"x": float("nan")}, {"x": 2**60}):
        with pytest.raises(ValueError):
            canonical_example_id(unusable)


def test_validation_diagnostics_and_the_scorable_reasons_are_part_of_the_env():
    from benchmax.envs import BaseEnv, ValidationDiagnostic

    diagnostic = ValidationDiagnostic("warning", "no_eval_split", "eval.jsonl is missing")
    assert (diagnostic.severity, diagnostic.location) == ("warning", None)
    assert BaseEnv.scorable_termination_reasons == frozenset(
        {"finished", "context_exceeded", "output_exceeded", "max_turns_exceeded", "tool_budget_exceeded"}
    )


def test_log_records_can_be_attributed_to_the_active_rollout():
    from benchmax.envs.logging import _CURRENT_GROUP_RIDS, _CURRENT_ROLLOUT_ID, group_context, rollout_context

    with rollout_context("r1"):
        assert _CURRENT_ROLLOUT_ID.get() == "r1"
        with group_context(["r1", "r2"]):
            assert _CURRENT_GROUP_RIDS.get() == ("r1", "r2")
    assert _CURRENT_ROLLOUT_ID.get() is None


async def test_a_direct_environment_runs_its_own_rollouts_in_a_group():
    """The third-party pattern: subclass ``Environment`` and write ``run_rollout`` yourself."""
    from benchmax.envs import (
        Dataset,
        Environment,
        Example,
        JsonRow,
        RolloutAttempt,
        RolloutFailure,
        RolloutRequest,
        StaticBearerAuth,
    )

    class Coin(Environment[JsonRow, RolloutAttempt]):
        async def create_dataset(self, split, base_dir, *, max_examples=None) -> Dataset[JsonRow]:
            return Dataset([Example(id="flip", payload={})])

        async def run_rollout(self, request: RolloutRequest[JsonRow]) -> RolloutAttempt:
            if request.rollout_id.endswith("broken"):
                raise RolloutFailure("harness_error", "the harness crashed")
            return RolloutAttempt(rollout_id=request.rollout_id, termination_reason="finished", rewards={"heads": 1.0})

        async def compute_group_rewards(self, rollouts: Sequence[RolloutAttempt]):
            return {rollout.rollout_id: {"group": float(len(rollouts))} for rollout in rollouts}

    env = Coin()
    (example,) = await env.create_dataset("train", Path("."))
    requests = [
        RolloutRequest(rid, example, "m", "http://127.0.0.1:9/v1", StaticBearerAuth("k")) for rid in ("a", "b-broken")
    ]
    outcomes = await env.run_group(requests)
    assert outcomes["a"].rewards == {"heads": 1.0, "group": 1.0}
    assert (outcomes["b-broken"].termination_reason, outcomes["b-broken"].rewards) == ("harness_error", {})
    assert outcomes["b-broken"].error == "the harness crashed"


def test_an_env_whose_create_dataset_takes_no_max_examples_runs_from_the_cli(tmp_path):
    from benchmax.testing import ScriptedServer

    data = tmp_path / "data"
    data.mkdir()
    rows = [{"color": "red", "script": '#script: [{"content": "Red"}]'}]
    (data / "eval.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    with ScriptedServer() as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmax.cli",
                "eval",
                f"{ENVS / 'dominant_color_env.py'}:DominantColorEnv",
                "--data-dir",
                str(data),
                "--base-url",
                server.base_url,
                "--model",
                "scripted",
                "--run-dir",
                str(tmp_path / "run"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
                "PATH": "/usr/bin:/bin",
                "COLUMNS": "200",
            },
        )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from benchmax import open_run

    with open_run(tmp_path / "run") as run:
        (record,) = run.rollouts()
    assert (record.termination_reason, record.rewards) == ("finished", {"correct": 1.0, "one_word": 1.0})


def test_rollout_logs_name_the_rollout_through_the_0_2_5_context(caplog):
    from benchmax.envs.logging import _CURRENT_ROLLOUT_ID, rollout_context

    seen = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(_CURRENT_ROLLOUT_ID.get())

    handler = Spy()
    logger = logging.getLogger("compat.spy")
    logger.addHandler(handler)
    try:

        async def work(rollout_id: str) -> None:
            with rollout_context(rollout_id):
                await asyncio.sleep(0)
                logger.warning("inside")

        async def main() -> None:
            await asyncio.gather(work("r1"), work("r2"))

        asyncio.run(main())
    finally:
        logger.removeHandler(handler)
    assert sorted(seen) == ["r1", "r2"]
