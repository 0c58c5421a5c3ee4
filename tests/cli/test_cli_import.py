"""``benchmax import FILE --env ENV -o RUN`` then ``benchmax rescore RUN``: recorded traffic scored by an env."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runkit import ENV_SPEC, run_cli, write_split

from benchmax.envs import canonical_example_id
from benchmax.store import open_run

sys.path.insert(0, str(Path(__file__).parents[1] / "traces"))

from otlp_support import chat_span, write_otlp


def _prompt(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


ROWS = [
    {"prompt_messages": _prompt("2+3?"), "answer": "5"},
    {"prompt_messages": _prompt("2+2?"), "answer": "4"},
]


def _data(tmp_path: Path) -> Path:
    write_split(tmp_path / "data", ROWS, "eval")
    return tmp_path / "data"


def _log(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _rescored(tmp_path: Path, run: Path) -> dict[str, dict]:
    rescored = run_cli("rescore", run, "--run-dir", tmp_path / "rescored")
    assert rescored.returncode == 0, rescored.stdout
    with open_run(tmp_path / "rescored") as stored:
        return {record.messages[0]["content"]: record for record in stored.rollouts()}


def test_imported_chat_logs_are_rescored_with_the_envs_reward(tmp_path):
    first_id = canonical_example_id(ROWS[0])
    log = _log(
        tmp_path / "log.jsonl",
        # names its example: the dataset's answer ("5") scores it
        {"example_id": first_id, "messages": [*_prompt("2+3?"), {"role": "assistant", "content": "5"}]},
        # no id, but its prompt is the second example's
        {"messages": [*_prompt("2+2?"), {"role": "assistant", "content": "5"}]},
        # neither: an example is made from it, its metadata the payload's other fields
        {
            "request": {"model": "m", "messages": _prompt("capital of France?")},
            "response": {"choices": [{"message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}]},
            "metadata": {"answer": "Paris"},
        },
    )

    imported = run_cli("import", log, "--env", ENV_SPEC, "--data-dir", _data(tmp_path), "-o", tmp_path / "run")

    assert imported.returncode == 0, imported.stdout
    assert "imported 3 conversations" in imported.stdout
    with open_run(tmp_path / "run") as run:
        records = list(run.rollouts())
        assert {record.termination_reason for record in records} == {"finished"}
        assert all(record.rewards == {} for record in records), "an import stores transcripts, unscored"
        assert run.run_meta.kind == "eval"
    by_prompt = _rescored(tmp_path, tmp_path / "run")
    assert by_prompt["2+3?"].rewards["correct"] == 1.0
    assert by_prompt["2+3?"].example_id == first_id
    assert by_prompt["2+2?"].rewards["correct"] == 0.0
    assert by_prompt["2+2?"].example_id == canonical_example_id(ROWS[1])
    assert by_prompt["capital of France?"].rewards["correct"] == 1.0


def test_a_malformed_line_writes_nothing_unless_skipped(tmp_path):
    good = {"messages": [*_prompt("2+3?"), {"role": "assistant", "content": "5"}]}
    log = _log(tmp_path / "log.jsonl", good, {"messages": [{"role": "robot", "content": "x"}]})
    data = _data(tmp_path)

    refused = run_cli("import", log, "--env", ENV_SPEC, "--data-dir", data, "-o", tmp_path / "run")

    assert refused.returncode == 1
    assert f"{log}:2: messages[0].role: 'robot' is not a chat role" in refused.stdout
    assert not (tmp_path / "run").exists()

    skipped = run_cli("import", log, "--env", ENV_SPEC, "--data-dir", data, "-o", tmp_path / "run", "--skip-bad")
    assert skipped.returncode == 0, skipped.stdout
    assert "imported 1 conversation" in skipped.stdout and "skipped 1 malformed line" in skipped.stdout


def test_an_unknown_example_id_is_refused_naming_the_line(tmp_path):
    log = _log(tmp_path / "log.jsonl", {"example_id": "nope", "messages": [*_prompt("x"), {"role": "assistant"}]})

    refused = run_cli("import", log, "--env", ENV_SPEC, "--data-dir", _data(tmp_path), "-o", tmp_path / "run")

    assert refused.returncode == 1
    assert f"{log}:1: example_id 'nope' is not in the env's eval split" in refused.stdout
    assert not (tmp_path / "run").exists()


def test_otlp_traces_from_the_sdk_are_imported_and_rescored(tmp_path):
    def record(tracer):
        with tracer.start_as_current_span("agent"):
            chat_span(tracer, _prompt("2+2?"), "4")

    path = write_otlp(tmp_path / "traces.json", record)

    imported = run_cli("import", path, "--env", ENV_SPEC, "--data-dir", _data(tmp_path), "-o", tmp_path / "run")

    assert imported.returncode == 0, imported.stdout
    by_prompt = _rescored(tmp_path, tmp_path / "run")
    assert by_prompt["2+2?"].rewards["correct"] == 1.0
    assert by_prompt["2+2?"].turns[0].usage.prompt_tokens == 10
