"""Security: data paths stay under base_dir, API keys never reach disk or pages, env code is never fetched."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import crashkit
import orjson
import pytest
from aiohttp import web
from starlette.testclient import TestClient

from benchmax import open_run
from benchmax.envs import DatasetError, EnvSpecError, JsonlDataset, resolve_under
from benchmax.inspector import create_app, export_static
from benchmax.loading import EnvSpec
from benchmax.store import export_run
from benchmax.testing import ScriptedServer

ROW = b'{"prompt_messages": [{"role": "user", "content": "hi"}]}\n'

# --- dataset paths ---------------------------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    base = tmp_path / "data"
    (base / "nested").mkdir(parents=True)
    (base / "eval.jsonl").write_bytes(ROW)
    (base / "nested" / "train.jsonl").write_bytes(ROW)
    (tmp_path / "secret.jsonl").write_bytes(ROW)
    return base


@pytest.mark.parametrize("name", ["eval.jsonl", "nested/train.jsonl", "nested/../eval.jsonl", "./eval.jsonl"])
def test_paths_inside_base_dir_resolve_and_load(data_dir, name):
    path = resolve_under(data_dir, name)
    assert path.is_relative_to(data_dir.resolve())
    assert len(JsonlDataset(name, base_dir=data_dir)) == 1


def test_an_absolute_path_inside_base_dir_is_accepted_as_the_spec_writes_it(data_dir):
    assert len(JsonlDataset(data_dir / "eval.jsonl", base_dir=data_dir)) == 1


@pytest.mark.parametrize("name", ["../secret.jsonl", "nested/../../secret.jsonl", "/etc/passwd", "..", "../data2/x"])
def test_paths_escaping_base_dir_are_refused_before_anything_is_read(data_dir, name):
    with pytest.raises(DatasetError, match="outside the data directory"):
        resolve_under(data_dir, name)
    with pytest.raises(DatasetError, match="outside the data directory"):
        JsonlDataset(name, base_dir=data_dir)


def test_a_symlink_pointing_out_of_base_dir_is_refused(data_dir, tmp_path):
    (data_dir / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    (data_dir / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(DatasetError, match="outside the data directory"):
        JsonlDataset("link.jsonl", base_dir=data_dir)
    with pytest.raises(DatasetError, match="outside the data directory"):
        JsonlDataset("linked_dir/secret.jsonl", base_dir=data_dir)


def test_a_symlink_that_stays_inside_base_dir_and_a_symlinked_base_dir_are_fine(data_dir, tmp_path):
    (data_dir / "alias.jsonl").symlink_to(data_dir / "nested" / "train.jsonl")
    (tmp_path / "data_link").symlink_to(data_dir, target_is_directory=True)
    assert len(JsonlDataset("alias.jsonl", base_dir=data_dir)) == 1
    assert len(JsonlDataset("eval.jsonl", base_dir=tmp_path / "data_link")) == 1


# --- env code ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["http://example.com/env.py:MathEnv", "https://example.com/envs/", "file:///tmp/env.py:Env", "s3://b/e.py"]
)
def test_an_env_spec_that_is_a_url_is_refused_with_a_clear_error_and_never_fetched(spec):
    with pytest.raises(EnvSpecError, match="never fetched; download it, review it, and pass its local path"):
        EnvSpec(spec).load()


def test_a_cli_eval_with_a_url_env_fails_cleanly(tmp_path):
    log = tmp_path / "eval.log"
    code = crashkit.run_cli(["eval", "http://127.0.0.1:9/env.py:Env", "--base-url", "http://127.0.0.1:9/v1"], log)
    assert code == 2
    assert "never fetched" in log.read_text() and "Traceback" not in log.read_text()


# --- API keys ------------------------------------------------------------------------------------------------------


def _pages(runs_root: Path, run_id: str) -> list[bytes]:
    """Every inspector page and JSON response for one run, as the browser would fetch them."""
    client = TestClient(create_app(runs_root), base_url="http://127.0.0.1", client=("127.0.0.1", 40000))
    bodies = []
    for url in (
        "/",
        f"/runs/{run_id}",
        "/api/runs",
        f"/api/runs/{run_id}/overview",
        f"/api/runs/{run_id}/distributions",
        f"/api/runs/{run_id}/progress",
        f"/api/runs/{run_id}/examples",
        f"/api/runs/{run_id}/groups",
        f"/api/runs/{run_id}/rollouts?limit=200",
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, response.text)
        bodies.append(response.content)
    for row in orjson.loads(bodies[-1])["rows"]:
        rollout_id = quote(row["rollout_id"], safe="/:")
        for url in (f"/api/runs/{run_id}/rollouts/{rollout_id}", f"/api/runs/{run_id}/download/{rollout_id}"):
            response = client.get(url)
            assert response.status_code == 200, (url, response.text)
            bodies.append(response.content)
    for group in orjson.loads(bodies[7])["rows"]:
        response = client.get(f"/api/runs/{run_id}/groups/{quote(group['group_id'], safe='/:')}")
        assert response.status_code == 200, response.text
        bodies.append(response.content)
    return bodies


def _files(root: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in root.rglob("*") if path.is_file()}


class KeyEchoingServer(ScriptedServer):
    """A server behind a proxy that echoes the caller's key in its errors, as some do.

    Prompts marked ``#echo-key 401`` are refused with the key in the message;
    ``#echo-key 503`` fails once that way (a retry, logged), then answers.
    """

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self._echo)
        self._echoed: set[bytes] = set()
        return app

    @web.middleware
    async def _echo(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        marker = raw.find(b"#echo-key ")
        if marker >= 0:
            status = int(raw[marker + 10 : marker + 13])
            key = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if status == 401 or raw not in self._echoed:
                self._echoed.add(raw)
                error = {"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}}
                return web.json_response(error, status=status)
        return await handler(request)


def _stored_with(state: dict[str, Any] | None, text: str, *, at_least: int) -> bool:
    """Whether the store holds ``at_least`` rollouts, one of them with ``text`` in its transcript."""
    if state is None or len(state["rollouts"]) < at_least:
        return False
    return any(text in str(messages) for _, _, messages in state["rollouts"].values())


def test_the_api_key_reaches_the_server_but_never_the_store_wal_logs_exports_or_inspector(tmp_path):
    key = f"sk-benchmax-{secrets.token_hex(16)}"
    needles = (key.encode(), key[12:].encode())  # the key, and its random part on its own
    env = {"BENCHMAX_RELIABILITY_KEY": key}
    spill = {"tool_calls": [{"name": "spill", "arguments": {"size": 5}}]}
    rows = [
        crashkit.scripted_row("plain", [{"content": "a"}]),
        crashkit.scripted_row("retried #echo-key 503", [{"content": "a"}]),
        crashkit.scripted_row("refused #echo-key 401", [{"content": "a"}]),
        crashkit.scripted_row("tool", [spill, {"content": "a"}]),
        *crashkit.rows(30, sleep=0.05),
    ]
    crashkit.write_split(tmp_path / "data", rows)
    runs_root = tmp_path / "runs"
    run_dir, log = runs_root / "keyed", tmp_path / "eval.log"
    with KeyEchoingServer(policy=crashkit.policy) as server:
        argv = [
            "eval", crashkit.ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--model", "scripted", "--api-key-env", "BENCHMAX_RELIABILITY_KEY", "--run-dir", run_dir,
            "--concurrency", "2", "--no-progress",
        ]  # fmt: skip
        # Killed mid-run first, so the write-ahead log is left on disk with recent rows in it. The
        # kill waits for the retried rollout itself to be stored: the server answers 503 only on a
        # body's first sight, so a retry that was still in flight at the kill would rerun on
        # resume without a retry, and without the log record this test reads.
        child = crashkit.start_cli(argv, log, env)
        deadline = time.monotonic() + 120
        while not _stored_with(crashkit.store_state(run_dir), "retried #echo-key", at_least=6):
            assert child.is_alive() and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.02)
        child.kill()
        child.join(10)
        mid_run = _files(run_dir)
        assert any(name.endswith("-wal") and data for name, data in mid_run.items()), "no WAL to check"

        assert crashkit.run_cli(["eval", "--resume", run_dir, "--no-progress"], log, env) == 0, log.read_text()
        sent = [headers.get("Authorization") for headers in server.headers]
    assert sent and set(sent) == {f"Bearer {key}"}, "the key must reach the server on every request"

    with open_run(run_dir) as run:
        reasons = {record.messages[0]["content"].split("\n")[0]: record for record in run.rollouts()}
        assert run.meta["config"]["api_key_env"] == "BENCHMAX_RELIABILITY_KEY"
        assert run.meta["env_file"] == str((crashkit.SUPPORT / "crash_env.py").resolve()), "what code ran is reported"
        logged = [entry.message for entry in run.logs()]
        export_run(run, tmp_path / "export.jsonl")
    refused = reasons["refused #echo-key 401"]
    assert refused.termination_reason == "model_error" and "Incorrect API key provided: ***" in refused.error
    assert reasons["retried #echo-key 503"].termination_reason == "finished"
    assert any("Incorrect API key provided: ***" in message for message in logged), "the retry is logged, masked"
    export_static(runs_root, tmp_path / "static")

    places = {
        **{f"mid-run {name}": data for name, data in mid_run.items()},
        **_files(run_dir),
        "export.jsonl": (tmp_path / "export.jsonl").read_bytes(),
        **_files(tmp_path / "static"),
        "CLI output": log.read_bytes(),
        **{f"inspector response {index}": body for index, body in enumerate(_pages(runs_root, "keyed"))},
    }
    leaks = [name for name, data in places.items() if any(needle in data for needle in needles)]
    assert leaks == [], f"the API key leaked into {leaks}"
    assert os.environ.get("BENCHMAX_RELIABILITY_KEY") is None
