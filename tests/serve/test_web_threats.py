"""What a web page and a hostile local client can do to ``benchmax serve``: the red-team probes, kept.

Each test is one probe of issue #35 against a real ``benchmax serve`` process on
loopback, spoken to with real clients (``websockets``, httpx) that send exactly
what a browser sends: a page at another origin always carries its ``Origin``
on a WebSocket handshake and on every POST, and a ``no-cors`` POST may only be
``text/plain``, form-encoded or multipart. ``docs/serve.md`` ("Threat model")
lists these probes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import httpx
import pytest
from serve_support import ENV_SPEC, events, mixed_rows, scripted, write_rows
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from benchmax.remote import wire
from benchmax.testing import free_port

FOREIGN = "http://evil.example"


def _ws(server, query=""):
    return f"ws://127.0.0.1:{server.port}/ws{query}"


async def _send(socket, kind, data=None):
    await socket.send(json.dumps({"type": kind, "data": data or {}}))
    return json.loads(await socket.recv())


# A web page at another origin.


async def test_a_page_at_another_origin_cannot_open_the_websocket_even_with_the_token(serve_env):
    server = serve_env(mixed_rows())
    for query in ("", f"?token={server.token}"):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(_ws(server, query), origin=FOREIGN):
                pass
        assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        async with connect(_ws(server, f"?token={server.token}"), origin="null"):  # a sandboxed frame, file://
            pass
    assert events(server.trace)["enter"] == 0


async def test_a_same_origin_or_allowed_origin_websocket_with_the_token_runs_an_episode(serve_env):
    server = serve_env(mixed_rows(), "--allow-origin", "https://trainer.example:8443")
    for origin in (f"http://127.0.0.1:{server.port}", "https://trainer.example:8443"):
        async with connect(_ws(server, f"?token={server.token}"), origin=origin) as socket:
            reset = await _send(socket, "reset", {"split": "eval", "index": 0})
            assert reset["type"] == "observation" and reset["data"]["done"] is False
            await socket.send(json.dumps({"type": "close"}))
    assert events(server.trace)["enter"] == 2


def test_a_page_at_another_origin_cannot_post_even_as_a_simple_request(serve_env):
    server = serve_env(mixed_rows())
    body = json.dumps({"split": "eval", "index": 0})
    # fetch(url, {method: "POST", mode: "no-cors", body}) sends text/plain and the page's Origin
    for headers in ({"Content-Type": "text/plain;charset=UTF-8"}, {"Content-Type": "application/json"}):
        refused = httpx.post(f"{server.url}/sessions", content=body, headers={**headers, "Origin": FOREIGN})
        assert refused.status_code == 403, refused.text
        assert "Origin" in refused.text and "--allow-origin" in refused.text
    assert events(server.trace)["enter"] == 0


def test_a_page_at_another_origin_cannot_read_the_prompts(serve_env):
    server = serve_env(mixed_rows())
    read = httpx.get(f"{server.url}/dataset/eval", headers={"Origin": FOREIGN})
    assert read.status_code == 403 and "access-control-allow-origin" not in read.headers
    assert httpx.get(f"{server.url}/dataset/eval").status_code == 200  # a local program, no Origin: a read is open


def test_a_body_that_is_not_declared_json_is_refused_415_before_env_code_runs(serve_env):
    server = serve_env(mixed_rows())
    body = json.dumps({"split": "eval", "index": 0})
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"Authorization": f"Bearer {server.token}"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        refused = httpx.post(f"{server.url}/sessions", content=body, headers=headers)
        assert refused.status_code == 415, refused.text
        assert refused.json()["error"]["code"] == "unsupported_media_type"
        assert "application/json" in refused.json()["error"]["message"]
    assert events(server.trace)["enter"] == 0
    ok = httpx.post(
        f"{server.url}/sessions",
        content=body,
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 200, ok.text


# The token that guards whatever runs env code.


async def test_by_default_running_env_code_needs_the_generated_token_kept_in_a_private_file(serve_env):
    server = serve_env(mixed_rows())
    path = wire.token_path(server.port)
    assert path.read_text().strip() == server.token and len(server.token) >= 24
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert server.token not in server.banner  # printed is where it is, not what it is
    assert str(path) in server.banner

    assert httpx.get(f"{server.url}/info").status_code == 200  # reads stay open to loopback
    refused = httpx.post(f"{server.url}/sessions", json={"split": "eval", "index": 0})
    assert refused.status_code == 401
    wrong = httpx.post(
        f"{server.url}/sessions", json={"split": "eval", "index": 0}, headers={"Authorization": "Bearer x"}
    )
    assert wrong.status_code == 401
    with pytest.raises(InvalidStatus) as ws_refused:
        async with connect(_ws(server)):
            pass
    assert ws_refused.value.response.status_code == 403
    assert events(server.trace)["enter"] == 0

    async with connect(_ws(server), additional_headers={"Authorization": f"Bearer {server.token}"}) as socket:
        assert (await _send(socket, "reset", {"split": "eval", "index": 0}))["type"] == "observation"
    server.stop()
    assert not path.exists()


def _plant_symlinked_dir(runtime, attacker):
    (runtime / "benchmax").symlink_to(attacker, target_is_directory=True)


def _plant_open_dir(runtime, attacker):
    (runtime / "benchmax" / "serve").mkdir(parents=True)
    os.chmod(runtime / "benchmax" / "serve", 0o777)
    (runtime / "benchmax" / "serve" / "planted").symlink_to(attacker / "received")


def _plant_another_users_dir(runtime, attacker):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root (the CI runs this as root too)")
    (runtime / "benchmax").mkdir(mode=0o700)
    os.chown(runtime / "benchmax", 65534, 65534)


@pytest.mark.parametrize(
    ("plant", "refusal"),
    [
        (_plant_symlinked_dir, "is not a directory of this user's"),
        (_plant_open_dir, "open to other users"),
        (_plant_another_users_dir, "belongs to uid 65534"),
    ],
    ids=["symlinked_dir", "world_writable_dir", "another_users_dir"],
)
def test_the_token_file_is_refused_where_another_user_could_redirect_or_read_it(tmp_path, plant, refusal):
    """XDG_RUNTIME_DIR kept across ``su`` or ``sudo -E`` may be another user's to write: what they plant
    there must never receive the token; serve refuses to start and says what to fix."""
    runtime, attacker = tmp_path / "runtime", tmp_path / "attacker"
    runtime.mkdir(mode=0o777)
    attacker.mkdir(mode=0o777)
    plant(runtime, attacker)
    data = write_rows(tmp_path / "data", mixed_rows())
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "serve", ENV_SPEC, "--port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0]
    assert process.returncode == 2, output
    assert "refusing to write the token file" in output and refusal in output, output
    assert list(attacker.rglob("*")) == [], "nothing of the token reaches a directory another user holds"


def test_no_token_opts_out_on_loopback_and_is_refused_beyond_it(serve_env, tmp_path):
    server = serve_env(mixed_rows(), "--no-token")
    assert server.token is None and not wire.token_path(server.port).exists()
    assert httpx.post(f"{server.url}/sessions", json={"split": "eval", "index": 0}).status_code == 200
    # still no page at another origin
    assert (
        httpx.post(
            f"{server.url}/sessions", json={"split": "eval", "index": 1}, headers={"Origin": FOREIGN}
        ).status_code
        == 403
    )

    from runkit import run_cli

    refused = run_cli("serve", "whatever.py", "--host", "0.0.0.0", "--no-token")
    assert refused.returncode == 2 and "--no-token" in " ".join(refused.stdout.split())


# A hostile local client.


async def test_a_binary_frame_is_answered_with_a_protocol_error_and_the_socket_goes_on(serve_env):
    server = serve_env(mixed_rows())
    async with connect(_ws(server, f"?token={server.token}")) as socket:
        await socket.send(b"\x00\x01binary")
        answer = json.loads(await socket.recv())
        assert answer["type"] == "error" and answer["data"]["code"] == "INVALID_MESSAGE"
        assert "JSON text frame" in answer["data"]["message"]
        await socket.send(json.dumps({"type": "reset", "data": {"split": "eval", "index": 0}}).encode())
        assert json.loads(await socket.recv())["data"]["code"] == "INVALID_MESSAGE"
        assert (await _send(socket, "reset", {"split": "eval", "index": 0}))["type"] == "observation"
        assert (await _send(socket, "state"))["data"]["step_count"] == 0
    assert events(server.trace)["enter"] == 1


def test_one_client_is_capped_below_the_server_and_told_why_with_a_429(serve_env):
    server = serve_env(mixed_rows(), "--max-sessions-per-client", "2")
    info = httpx.get(f"{server.url}/info").json()
    assert info["max_sessions_per_client"] == 2
    post = f"{server.url}/sessions"
    opened = [server.http.post(post, json={"split": "eval", "index": i}) for i in range(2)]
    assert [response.status_code for response in opened] == [200, 200]
    refused = server.http.post(post, json={"split": "eval", "index": 2})
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "capacity" and "--max-sessions-per-client" in error["message"]
    assert events(server.trace)["enter"] == 2
    server.http.delete(f"{server.url}/sessions/{opened[0].json()['session_id']}")
    assert server.http.post(post, json={"split": "eval", "index": 2}).status_code == 200


@pytest.mark.parametrize("source", ["127.0.0.2", "127.0.0.3"])
def test_the_share_is_per_credential_so_another_loopback_address_does_not_bypass_it(serve_env, source):
    server = serve_env(mixed_rows(), "--max-sessions-per-client", "2")
    post = f"{server.url}/sessions"
    opened = [server.http.post(post, json={"split": "eval", "index": i}) for i in range(2)]
    assert [response.status_code for response in opened] == [200, 200]
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, headers=server.headers, timeout=60) as elsewhere:
        refused = elsewhere.post(post, json={"split": "eval", "index": 2})
    assert refused.status_code == 429, refused.text
    message = refused.json()["error"]["message"]
    assert "token sha256:" in message and server.token not in message
    assert events(server.trace)["enter"] == 2


async def test_websocket_sessions_count_against_the_same_per_client_cap(serve_env):
    server = serve_env(mixed_rows(), "--max-sessions-per-client", "1")
    assert server.http.post(f"{server.url}/sessions", json={"split": "eval", "index": 0}).status_code == 200
    async with connect(_ws(server, f"?token={server.token}")) as socket:
        refused = await _send(socket, "reset", {"split": "eval", "index": 1})
        assert refused["type"] == "error" and "--max-sessions-per-client" in refused["data"]["message"]
    assert events(server.trace)["enter"] == 1


def test_the_default_session_cap_follows_the_memory_there_is():
    from benchmax.serve import ServeConfig, default_max_sessions

    gib = 1024**3
    assert default_max_sessions(available=1 * gib) == 16  # a small machine: the floor
    assert default_max_sessions(available=4 * gib) == 4 * gib // (64 * 1024**2)
    assert default_max_sessions(available=512 * gib) == 1024  # a big one: the ceiling
    config = ServeConfig()
    assert config.max_sessions == default_max_sessions()
    assert 1 <= config.max_sessions_per_client <= config.max_sessions


def test_benchmax_eval_waits_for_its_share_of_sessions_instead_of_being_refused(tmp_path, model, serve_env):
    from runkit import run_cli

    from benchmax.store import open_run

    rows = [scripted(f"q{i}", [{"content": f"a{i}"}], f"a{i}") for i in range(6)]
    server = serve_env(rows, "--max-sessions-per-client", "1")
    run_dir = tmp_path / "run"
    done = run_cli(
        "eval", server.url, "--base-url", model.base_url, "--run-dir", run_dir,
        "--group-size", "2", "--concurrency", "8", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    with open_run(run_dir) as run:
        assert run.meta["status"] == "completed"
        assert [record.termination_reason for record in run.rollouts()] == ["finished"] * 12
    assert events(server.trace) == {"enter": 12, "exit": 12}
