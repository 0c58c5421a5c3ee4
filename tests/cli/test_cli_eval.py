"""``benchmax eval`` in a real subprocess against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runkit import ENV_SPEC, cli_env, png_data_uri, row, run_cli, write_split

from benchmax import open_run
from benchmax.envs import canonical_example_id
from benchmax.testing import ScriptedServer

SECRET = "sk-test-6f1c0ffee-do-not-store"


def _eval(tmp_path: Path, server, *extra: str | Path, env: dict[str, str] | None = None):
    return run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url, "--model", "scripted",
        "--run-dir", tmp_path / "run", *extra, env=env,
    )  # fmt: skip


def _cells(output: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no table row {first!r} in:\n{output}")


def test_the_summary_prints_the_hand_computed_figures_of_the_run(tmp_path, server):
    rows = [
        row("4", "both right", bonus=0.5),
        row("7", "one right", answers=["7", "x"]),
        row("1", "both fail", script=[{"status": 400}]),
    ]
    write_split(tmp_path / "data", rows)

    result = _eval(tmp_path, server, "--group-size", "2", "--seed", "0")

    # Two of six rollouts failed operationally: more than --max-failure-rate 0.1, so exit 1.
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "run failed: 2 of 6 rollouts (33.3%) failed operationally" in out
    assert "first model_error error: HTTP 400" in out
    # correct: 1 1 | 1 0 | 0 0 (both filled); bonus: .5 .5 | 0 0 | 0 0 (four filled)
    assert _cells(out, "correct") == ["correct", "0.5000", "0.5000", "0", "1", "2"]
    assert _cells(out, "bonus") == ["bonus", "0.1667", "0.2357", "0", "0.5", "4"]
    # Totals 1.5 1.5 | 1 0 | 0 0: three of six pass; the first and last groups carry no signal.
    assert _cells(out, "rollouts") == ["rollouts", "6 (4 scored, 2 failed)"]
    assert _cells(out, "pass rate (reward >= 1)") == ["pass rate (reward >= 1)", "50.0% (3/6)"]
    assert _cells(out, "groups without learning signal")[1] == "2 of 3 (all siblings scored the same)"
    assert _cells(out, "finished") == ["finished", "4"]
    assert _cells(out, "model_error") == ["model_error", "2"]
    ids = [canonical_example_id(item) for item in rows]
    # each example shows its short id and its prompt on one line, beside its passes
    assert [_cells(out, example_id[:8])[1:] for example_id in ids] == [
        ['both right #answers: ["4"]', "2/2", "100%"],
        ['one right #answers: ["7", "x"]', "1/2", "50%"],
        ['both fail #answers: ["1"] #script: [{"status": 400}]', "0/2", "0%"],
    ]
    # The scripted server counts a prompt as len(text) // 4 tokens and a one-character answer as 1.
    prompt_tokens = 2 * sum(len(item["prompt_messages"][0]["content"]) // 4 for item in rows[:2])
    assert _cells(out, "tokens prompt / completion")[1] == f"{prompt_tokens} / 4"
    with open_run(tmp_path / "run") as run:
        stats = run.stats()
    assert _cells(out, "latency p50 / p95")[1] == f"{stats.latency_p50:.2f}s / {stats.latency_p95:.2f}s"
    assert "rollouts" in out and "6/6" in out, "the live progress shows rollouts done/total"
    assert f"stored in {tmp_path / 'run'}" in out


def test_sampling_options_extra_body_and_the_api_key_reach_the_server_and_the_key_is_never_stored(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "fine"), row("2", "fails", script=[{"status": 401, "message": "no"}])])

    result = _eval(
        tmp_path, server, "--group-size", "2", "--temperature", "0.25", "--top-p", "0.9", "--max-tokens", "33",
        "--seed", "7", "--extra-body", '{"top_k": 4, "min_p": 0.05}', "--api-key-env", "BENCHMAX_KEY_FOR_TESTS",
        "--max-failure-rate", "0.5", env=cli_env(BENCHMAX_KEY_FOR_TESTS=SECRET),
    )  # fmt: skip

    assert result.returncode == 0, result.stdout
    bodies = sorted(server.requests, key=lambda body: (body["messages"][0]["content"], body["seed"]))
    assert [
        (body["seed"], body["temperature"], body["top_p"], body["max_tokens"], body["top_k"], body["min_p"])
        for body in bodies
    ] == [(seed, 0.25, 0.9, 33, 4, 0.05) for seed in (7, 8, 7, 8)]
    assert {headers["Authorization"] for headers in server.headers} == {f"Bearer {SECRET}"}
    stored = b"".join(path.read_bytes() for path in sorted((tmp_path / "run").iterdir()) if path.is_file())
    assert b"BENCHMAX_KEY_FOR_TESTS" in stored, "the variable's name is kept, so the check reads the right bytes"
    assert SECRET.encode() not in stored
    assert SECRET not in result.stdout


def test_env_args_are_parsed_as_json_and_fall_back_to_strings(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "only")])
    trace = tmp_path / "trace"

    result = _eval(
        tmp_path, server, "--env-arg", f'trace_dir="{trace}"', "--env-arg", "level=3", "--env-arg", "ratio=0.5",
        "--env-arg", 'tags=["a", 1]', "--env-arg", "strict=true", "--env-arg", "word=plain",
        "--env-arg", 'nested={"k": null}', "--no-progress",
    )  # fmt: skip

    assert result.returncode == 0, result.stdout
    expected = {
        "trace_dir": str(trace), "level": 3, "ratio": 0.5, "tags": ["a", 1], "strict": True, "word": "plain",
        "nested": {"k": None},
    }  # fmt: skip
    assert json.loads((trace / "kwargs.json").read_text()) == expected
    with open_run(tmp_path / "run") as run:
        assert run.meta["config"]["env_kwargs"] == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--extra-body", "[1, 2]"], "must be a JSON object"),
        (["--extra-body", "{nope"], "not JSON"),
        (["--env-arg", "no-equals-sign"], "use key=value with a Python identifier key"),
        (["--group-size", "2", "--batch-size", "3"], "3 is not a multiple of --group-size 2"),
        (["--split", "test"], "'test' is not one of 'train', 'eval'"),
        (["--executor", "foo"], "'foo' is not one of 'local', 'ray'"),
        (["--group-size", "0"], "--group-size"),
        (["--max-examples", "0"], "--max-examples"),
    ],
    ids=[
        "extra-body-not-object",
        "extra-body-not-json",
        "env-arg-shape",
        "batch-size",
        "split",
        "executor",
        "group-size",
        "max-examples",
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path, server, args, message):
    write_split(tmp_path / "data", [row("1", "only")])

    result = _eval(tmp_path, server, *args)

    assert result.returncode == 2
    assert message in result.stdout
    assert server.counts["requests"] == 0
    assert not (tmp_path / "run").exists()


def test_user_errors_print_one_clear_line_instead_of_a_traceback(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "only")])

    missing_env = run_cli("eval", tmp_path / "nothere.py", "--base-url", server.base_url, "--run-dir", tmp_path / "r1")
    missing_key = _eval(tmp_path, server, "--api-key-env", "BENCHMAX_UNSET_VARIABLE_FOR_TESTS")
    missing_run = run_cli("eval", "--resume", tmp_path / "no-run")

    assert (missing_env.returncode, missing_key.returncode, missing_run.returncode) == (2, 2, 2)
    assert f"error: {tmp_path / 'nothere.py'}: env file not found" in missing_env.stdout
    assert "--api-key-env BENCHMAX_UNSET_VARIABLE_FOR_TESTS: that environment variable is not set" in missing_key.stdout
    assert "no benchmax run at" in missing_run.stdout
    assert not any("Traceback" in r.stdout for r in (missing_env, missing_key, missing_run))


def test_resume_refuses_a_different_env_and_a_changed_dataset(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "one"), row("2", "two")])
    assert _eval(tmp_path, server, "--no-progress").returncode == 0

    other_env = run_cli("eval", tmp_path / "other.py:Env", "--resume", tmp_path / "run")
    write_split(tmp_path / "data", [row("1", "one"), row("3", "three")])
    changed = run_cli("eval", "--resume", tmp_path / "run", "--no-progress")

    assert other_env.returncode == 2 and "resume continues the stored run as it was" in other_env.stdout
    assert changed.returncode == 2
    assert "the dataset changed since this run started: first difference at index 1" in (changed.stdout)


def test_the_request_limit_option_reaches_the_stored_engine_config(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "only")])

    result = _eval(tmp_path, server, "--max-requests", "3", "--no-progress")

    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        assert run.meta["config"]["engine"]["max_requests"] == 3


def test_a_run_where_no_rollout_could_be_scored_exits_1_and_says_why(tmp_path, server):
    write_split(
        tmp_path / "data",
        [
            row("1", "a", script=[{"status": 400, "message": "bad model"}]),
            row("2", "b", script=[{"status": 400, "message": "bad model"}]),
        ],
    )

    result = _eval(tmp_path, server, "--max-failure-rate", "1")

    assert result.returncode == 1, result.stdout
    assert "run failed: no rollout could be scored: all 2 failed, most as model_error (2)" in result.stdout
    assert "first model_error error: HTTP 400: invalid_request_error: bad model" in result.stdout


@pytest.mark.parametrize(("rate", "code"), [("0.4", 1), ("0.5", 0)])
def test_the_failure_rate_threshold_decides_the_exit_code(tmp_path, server, rate, code):
    write_split(tmp_path / "data", [row("1", "fine"), row("2", "fails", script=[{"status": 400}])])

    result = _eval(tmp_path, server, "--max-failure-rate", rate)

    assert result.returncode == code, result.stdout
    assert ("run failed" in result.stdout) == (code == 1)


def test_an_error_after_the_live_progress_starts_on_its_own_line(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "one")])

    result = run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url, "--model", "nope",
        "--run-dir", tmp_path / "r1",
    )  # fmt: skip

    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert any(line.startswith("tokens") for line in lines), "the live progress block was shown"
    assert any(line.startswith("error: --model nope: ") for line in lines), result.stdout


@pytest.mark.parametrize("broken", ["env", "row"])
def test_an_env_or_a_dataset_that_fails_prints_only_its_error_and_leaves_no_run(tmp_path, server, broken):
    """No banner, no run dir, no progress block, no model request: the error alone, before anything starts."""
    write_split(tmp_path / "data", [row("1", "one"), row("2", "two")])
    env = ENV_SPEC
    if broken == "env":
        env = str(tmp_path / "nothere.py")
        expected = f"error: {tmp_path / 'nothere.py'}: env file not found"
    else:
        with (tmp_path / "data" / "eval.jsonl").open("a") as data:
            data.write("{oops\n")
        expected = f"error: {tmp_path / 'data' / 'eval.jsonl'}:3: invalid JSON"

    result = run_cli(
        "eval", env, "--data-dir", tmp_path / "data", "--base-url", server.base_url, "--run-dir", tmp_path / "r1"
    )

    assert result.returncode == 2
    (line,) = result.stdout.splitlines()
    assert line.startswith(expected), result.stdout
    assert not (tmp_path / "r1").exists()
    assert server.counts["models"] == server.counts["requests"] == 0


def test_a_run_where_every_example_passes_says_so_instead_of_listing_them(tmp_path, server):
    write_split(tmp_path / "data", [row("1", "one"), row("2", "two")])

    result = _eval(tmp_path, server, "--no-progress")

    assert result.returncode == 0, result.stdout
    assert "pass rate per example: every example passes (2 examples, reward >= 1 on every rollout)" in result.stdout
    assert "pass rate per example (lowest" not in result.stdout
    assert "100%" not in result.stdout


def test_the_summary_samples_show_the_task_beside_the_answer_with_images_as_placeholders(tmp_path):
    image = {"type": "image_url", "image_url": {"url": png_data_uri(640, 480)}}
    rows = [
        {"prompt_messages": [{"role": "user", "content": [{"type": "text", "text": "Which colour?"}, image]}],
         "answer": "red"},
        {"prompt_messages": [{"role": "user", "content": "Say blue [bold]please[/bold]"}], "answer": "blue"},
    ]  # fmt: skip
    write_split(tmp_path / "data", rows)

    with ScriptedServer(policy=lambda body: {"content": "red"}) as server:
        result = _eval(tmp_path, server, "--no-progress")

    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    at = lines.index("samples")
    assert lines[at + 1].startswith("  passed  reward 1  finished  eval/")
    assert lines[at + 2 : at + 5] == [
        "    prompt: Which colour? [image 640x480 png]", "    fields: answer=red", "    answer: red",
    ]  # fmt: skip
    assert lines[at + 5].startswith("  not passed  reward 0  finished  eval/")
    assert lines[at + 6 : at + 9] == [
        "    prompt: Say blue [bold]please[/bold]", "    fields: answer=blue", "    answer: red",
    ]  # fmt: skip
    assert _cells(result.stdout, canonical_example_id(rows[1])[:8])[1:] == ["Say blue [bold]please[/bold]", "0/1", "0%"]
    assert "base64" not in result.stdout and "iVBOR" not in result.stdout


BAD_TOOL_ENV = '''from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset


class BadToolEnv(BaseEnv):
    max_turns = 2

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "add", "parameters": {"type": "objekt"}}}]

    async def compute_reward(self, rollout):
        return {"correct": 1.0}
'''


def test_an_env_with_a_bad_tool_schema_is_refused_at_its_line_before_any_run_is_announced(tmp_path, server):
    (tmp_path / "env.py").write_text(BAD_TOOL_ENV)
    write_split(tmp_path, [row("4", "add two and two")])

    result = run_cli(
        "eval", tmp_path / "env.py", "--base-url", server.base_url, "--model", "scripted", cwd=tmp_path
    )  # fmt: skip

    assert result.returncode == 2, result.stdout
    line = BAD_TOOL_ENV.splitlines().index("    async def list_tools(self):") + 1
    where = f"{tmp_path / 'env.py'}:{line}"
    assert f"error: {where}: BadToolEnv.list_tools()[0] ('add'): invalid JSON Schema" in result.stdout
    assert "run:" not in result.stdout and "0/0" not in result.stdout, "no run was made, so none is announced"
    assert not (tmp_path / "runs").exists()
