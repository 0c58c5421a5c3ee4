"""A failed span's status says what kind of failure it was, never what the model or a tool wrote,
unless ``--otel-content`` exports content: end to end, ``benchmax eval`` in a real subprocess
against the scripted model server, exporting to a real OTLP/HTTP receiver on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from runkit import cli_command, write_split

PROMPT_TEXT = "PROMPT-TEXT-7f3a"
ARGUMENT_TEXT = "ARGUMENT-TEXT-91c2"
TOOL_OUTPUT = "TOOL-OUTPUT-55e0"

ENV = f'''
from benchmax.envs import BaseEnv, JsonlDataset, ToolError


class QuotingEnv(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{{split}}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [{{"type": "function", "function": {{"name": "look", "parameters": {{"type": "object"}}}}}}]

    async def run_tool(self, rollout_id, tool_name, **args):
        raise ToolError(f"{TOOL_OUTPUT}: nothing found for {{args['query']}}")

    async def compute_reward(self, rollout):
        return {{"done": 1.0}}
'''

TOOL_FAILS = [{"tool_calls": [{"id": "c1", "name": "look", "arguments": {"query": ARGUMENT_TEXT}}]}, {"content": "ok"}]
SERVER_ECHOES = [{"status": 400, "message": f"this prompt is refused: {PROMPT_TEXT}"}]


def _eval(tmp_path: Path, receiver_url: str, server_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "env.py").write_text(ENV)
    rows = [
        {"prompt_messages": [{"role": "user", "content": f"{PROMPT_TEXT}\n#script: {json.dumps(script)}"}]}
        for script in (TOOL_FAILS, SERVER_ECHOES)
    ]
    write_split(tmp_path / "data", rows)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"})
    return subprocess.run(
        cli_command(
            "eval", f"{tmp_path / 'env.py'}:QuotingEnv", "--data-dir", tmp_path / "data", "--base-url", server_url,
            "--model", "scripted", "--run-dir", tmp_path / "run", "--no-progress", "--otel-endpoint", receiver_url,
            *extra,
        ),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("content", [False, True], ids=["content-off", "otel-content"])
def test_failed_spans_carry_their_kind_and_only_with_otel_content_the_text(tmp_path, server, receiver, content):
    result = _eval(tmp_path, receiver.url, server.base_url, *(["--otel-content"] if content else []))
    assert result.returncode in (0, 1), result.stdout

    failed = {span.name: span for span in receiver.spans if span.status_code == 2}  # STATUS_CODE_ERROR
    assert {"execute_tool look", "chat scripted", "rollout"} <= set(failed), sorted(failed)
    statuses = " | ".join(span.status_message for span in receiver.spans)
    if content:
        assert ARGUMENT_TEXT in failed["execute_tool look"].status_message
        assert TOOL_OUTPUT in failed["execute_tool look"].status_message
        assert PROMPT_TEXT in failed["chat scripted"].status_message
    else:
        for text in (PROMPT_TEXT, ARGUMENT_TEXT, TOOL_OUTPUT):
            assert text not in statuses
        assert failed["execute_tool look"].status_message == "tool_error"
        assert failed["chat scripted"].status_message == "ModelError (HTTP 400)"
        assert failed["rollout"].status_message == "model_error"
