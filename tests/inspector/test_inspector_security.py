"""Who may read the inspector: its token, by default on every address; loopback only with --no-token."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from benchmax.access import COOKIE, resolve_token
from benchmax.inspector import InspectorError, create_app, serve
from benchmax.inspector.catalog import REDACTED, redact

TOKEN = "s3cret-token-for-tests"


def test_a_non_local_client_is_refused_without_a_token(runs_dir: Path) -> None:
    remote = TestClient(create_app(runs_dir), base_url="http://127.0.0.1", client=("203.0.113.7", 5555))
    response = remote.get("/api/runs")
    assert response.status_code == 403 and "token" in response.text
    assert remote.get("/").status_code == 403


def test_a_foreign_host_header_is_refused_without_a_token(runs_dir: Path) -> None:
    rebinding = TestClient(create_app(runs_dir), base_url="http://evil.example:8765", client=("127.0.0.1", 5555))
    assert rebinding.get("/api/runs").status_code == 403
    local = TestClient(create_app(runs_dir), base_url="http://localhost:8765", client=("127.0.0.1", 5555))
    assert local.get("/api/runs").status_code == 200


def test_with_a_token_every_request_must_carry_it(runs_dir: Path) -> None:
    client = TestClient(
        create_app(runs_dir, token=TOKEN),
        base_url="http://192.0.2.10:8765",
        client=("203.0.113.7", 5555),
        follow_redirects=False,
    )
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200

    link = client.get(f"/runs/a?token={TOKEN}&tab=groups")
    assert link.status_code == 303 and link.headers["location"] == "/runs/a?tab=groups"
    assert "HttpOnly" in link.headers["set-cookie"] and "SameSite=Strict" in link.headers["set-cookie"]
    assert client.get("/api/runs").status_code == 200  # the cookie the link set
    client.cookies.clear()
    assert client.get("/api/runs").status_code == 401
    client.cookies.set(COOKIE, TOKEN)
    assert client.get("/api/runs").status_code == 200


def test_binding_beyond_loopback_always_gets_a_token() -> None:
    assert resolve_token("127.0.0.1", None) is None
    assert len(resolve_token("127.0.0.1", None, required=True) or "") >= 24
    generated = resolve_token("0.0.0.0", None)
    assert generated and len(generated) >= 24
    assert resolve_token("0.0.0.0", TOKEN) == TOKEN
    with pytest.raises(InspectorError, match="--token"):
        resolve_token("0.0.0.0", "short")


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_a_served_inspector_answers_only_with_its_token_on_any_address(runs_dir: Path, host: str) -> None:
    """The real command path: a subprocess prints a link carrying a generated token; loopback
    too, since any user of the machine can connect there; the link's token becomes a cookie."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from benchmax.inspector import serve; "
            "serve(sys.argv[1], host=sys.argv[2], port=0, open_browser=False)",
            str(runs_dir),
            host,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
        assert match, line
        port, token = match.groups()
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=10) as http:
            assert http.get(f"{base}/api/runs").status_code == 401
            assert http.get(f"{base}/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        with httpx.Client(base_url=base, timeout=10, follow_redirects=True) as browser:
            assert browser.get("/").status_code == 401
            opened = browser.get(f"/?token={token}")
            assert opened.status_code == 200 and opened.url.query == b""
            assert browser.get("/api/runs").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_no_token_is_an_explicit_loopback_only_choice(runs_dir: Path) -> None:
    with pytest.raises(InspectorError, match="loopback only"):
        serve(runs_dir, host="0.0.0.0", port=0, open_browser=False, require_token=False)
    with pytest.raises(InspectorError, match="takes no --token"):
        serve(runs_dir, port=0, open_browser=False, token=TOKEN, require_token=False)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from benchmax.inspector import serve; "
            "serve(sys.argv[1], port=0, open_browser=False, require_token=False)",
            str(runs_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/$", line.strip())
        assert match, line
        assert "any user of this machine" in process.stdout.readline()
        with httpx.Client(timeout=10) as http:
            assert http.get(f"http://127.0.0.1:{match.group(1)}/api/runs").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_secret_looking_metadata_is_redacted() -> None:
    meta = {
        "api_key": "sk-live-abcdefghijklmnop",
        "config": {"api_key_env": "OPENAI_API_KEY", "headers": {"Authorization": "Bearer xyz"}},
        "base_url": "https://user:hunter2@models.example/v1",
        "note": "called with sk-abcdefghijklmnopqrst",
        "served": "the env at http://127.0.0.1:8001/?access_token=hunter3&page=2 answered",
    }
    shown = redact(meta)
    assert shown["api_key"] == REDACTED
    assert shown["config"]["api_key_env"] == "OPENAI_API_KEY"
    assert shown["config"]["headers"]["Authorization"] == REDACTED
    assert shown["base_url"] == "https://models.example/v1"
    assert shown["served"] == "the env at http://127.0.0.1:8001/?access_token=***&page=2 answered"
    assert "sk-abcdefghijklmnopqrst" not in shown["note"]
