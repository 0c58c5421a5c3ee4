"""Size bounds: long model text and tool results are cut, marked, and cut the same in the store and on the wire."""

from __future__ import annotations

import crashkit

from benchmax import open_run
from benchmax.testing import ScriptedServer


def test_cli_size_flags_bound_what_is_sent_back_to_the_model_and_what_is_stored(tmp_path):
    steps = [
        {"content": "z" * 3000, "tool_calls": [{"name": "spill", "arguments": {"size": 5000}}]},
        {"content": "w" * 150},
    ]
    crashkit.write_split(tmp_path / "data", [crashkit.scripted_row("long", steps)])
    run_dir, log = tmp_path / "run", tmp_path / "eval.log"
    with ScriptedServer(policy=crashkit.policy) as server:
        argv = [
            "eval", crashkit.ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--model", "scripted", "--run-dir", run_dir, "--no-progress",
            "--max-content-chars", "100", "--max-tool-result-chars", "200",
        ]  # fmt: skip
        code = crashkit.run_cli(argv, log)
        assert code == 0, log.read_text()
        second_request = server.requests[1]["messages"]

    assistant = "z" * 100 + "…[truncated 2900 chars]"
    tool = "y" * 200 + "…[truncated 4800 chars]"
    assert second_request[1]["content"] == assistant
    assert second_request[2]["content"] == tool
    with open_run(run_dir) as run:
        (record,) = list(run.rollouts())
        engine = run.meta["config"]["engine"]
    final = "w" * 100 + "…[truncated 50 chars]"
    assert [message["content"] for message in record.messages[1:]] == [assistant, tool, final]
    assert record.final_text == final
    assert (engine["max_content_chars"], engine["max_tool_result_chars"]) == (100, 200), "kept for --resume"


def test_size_flags_must_be_positive(tmp_path):
    log = tmp_path / "eval.log"
    code = crashkit.run_cli(["eval", crashkit.ENV_SPEC, "--max-tool-result-chars", "0"], log)
    assert code == 2
    assert "--max-tool-result-chars" in log.read_text()
