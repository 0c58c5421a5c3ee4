"""Credentials never reach the run directory, an export or the terminal (issue #35, items 4-6).

Each test drives the real CLI against the scripted server on loopback and then reads every byte
the run left behind: the SQLite files, a JSONL export and what the command printed.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from runkit import ENV_SPEC, cli_env, row, run_cli, write_split

from benchmax.testing import ScriptedServer

KEY = "sk-b64/Lq+Z9x/0aBcDeFgH+iJkLmN/oPqRsTuV=="
"""A key that looks like base64: a JSON writer may spell its slashes ``\\/``."""
USER, PASSWORD = "alice", "p@ss:w0rd-hunter2-Z9"
PIECE = 12


def escaped(text: str) -> str:
    """``text`` as a JSON string body with every character a ``\\uXXXX`` escape (without the quotes)."""
    return "".join(f"\\u{ord(char):04x}" for char in text)


ECHOES: dict[str, bytes] = {
    "escaped": b'{"error": {"message": "Incorrect API key provided: ' + escaped(KEY).encode() + b'"}}',
    "escaped_detail": b'{"detail": "bad key ' + escaped(KEY).encode() + b'"}',
    "escaped_other_shape": b'{"msg": "bad key", "echo": {"key": "' + escaped(KEY).encode() + b'"}}',
    "slashes_escaped": b'{"error": "no such key ' + KEY.replace("/", "\\/").encode() + b'"}',
    "split_across_fields": (
        b'{"error": {"code": "' + KEY[:20].encode() + b'", "message": "' + KEY[20:].encode() + b'"}}'
    ),
    # a page is summarised in one line of 300 characters, a JSON error's message kept to 2,000: an echo
    # across either cut is masked whole, never cut into a piece of the key
    "cut_at_the_line_limit": b"x" * 290 + KEY.encode() + b" was refused",
    "cut_at_the_message_limit": b'{"error": {"message": "' + b"x" * 1990 + KEY.encode() + b' was refused"}}',
    "base64_header": b'{"error": {"message": "header was '
    + base64.b64encode(f"Bearer {KEY}".encode())
    + b'"}}',
    "base64_urlsafe": b'{"error": "saw ' + base64.urlsafe_b64encode(f"xx{KEY}".encode()) + b'"}',
    "percent_encoded": b"bad request: key=" + quote(KEY, safe="").encode(),
}


def echo_policy(body: dict[str, Any]) -> dict[str, Any]:
    """A proxy that answers 401 and echoes the key the way the prompt's ``#echo:`` line names."""
    text = str(body["messages"][0].get("content") or "")
    kind = text.split("#echo: ", 1)[1].split("\n", 1)[0].strip()
    return {"status": 401, "body": ECHOES[kind]}


def spellings(secret: str) -> list[str]:
    """Every 12-character piece of the secret and of its base64 and percent spellings."""
    forms = {secret, quote(secret, safe="")}
    for prefix in ("", "x", "xx", "Bearer "):
        encoded = base64.b64encode((prefix + secret).encode()).decode()
        forms.add(encoded[len(prefix) * 4 // 3 + 4 : -4])
    return sorted({form[i : i + PIECE] for form in forms for i in range(len(form) - PIECE + 1)})


def leaks(secret: str, *places: Path | str) -> list[str]:
    found = []
    for place in places:
        if isinstance(place, Path):
            files = [place] if place.is_file() else [path for path in place.rglob("*") if path.is_file()]
            blobs = [(str(path), path.read_bytes().decode("latin-1")) for path in files]
        else:
            blobs = [("output", place)]
        for name, blob in blobs:
            found.extend(f"{name}: {piece!r}" for piece in spellings(secret) if piece in blob)
    return found


def test_a_key_echoed_escaped_split_cut_or_base64_is_masked_everywhere(tmp_path: Path) -> None:
    write_split(tmp_path / "data", [row("1", f"q {index}\n#echo: {kind}") for index, kind in enumerate(ECHOES)])
    export = tmp_path / "export.jsonl"
    with ScriptedServer(policy=echo_policy) as server:
        ran = run_cli(
            "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--api-key-env", "BENCHMAX_ECHO_KEY", "--run-dir", tmp_path / "run", "--no-progress",
            "--max-failure-rate", "1",
            env=cli_env(BENCHMAX_ECHO_KEY=KEY),
        )  # fmt: skip
        assert {headers["Authorization"] for headers in server.headers} == {f"Bearer {KEY}"}
    assert "Traceback" not in ran.stdout, ran.stdout
    exported = run_cli("export", tmp_path / "run", "--output", export)
    assert exported.returncode == 0, exported.stdout
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert len(rows) == len(ECHOES) and all("HTTP 401" in item["error"] and "***" in item["error"] for item in rows)
    assert leaks(KEY, tmp_path / "run", export, ran.stdout, exported.stdout) == []


def run_with_userinfo(tmp_path: Path, server: ScriptedServer, *extra: str, **env: str) -> Any:
    url = server.base_url.replace("http://", f"http://{quote(USER)}:{quote(PASSWORD, safe='')}@")
    write_split(tmp_path / "data", [row("1")])
    return run_cli(
        "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", url, "--run-dir", tmp_path / "run",
        "--no-progress", *extra,
        env=cli_env(**env),
    )  # fmt: skip


def test_userinfo_in_base_url_is_sent_as_basic_auth_and_never_stored_or_printed(tmp_path: Path) -> None:
    with ScriptedServer(policy=lambda body: {"content": "1"}) as server:
        ran = run_with_userinfo(tmp_path, server)
        sent = {headers.get("Authorization") for headers in server.headers}
    assert ran.returncode == 0, ran.stdout
    assert sent == {"Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
    assert f"-> {server.base_url}" in ran.stdout
    assert leaks(PASSWORD, tmp_path / "run", ran.stdout) == []
    assert USER not in ran.stdout
    for blob in [path.read_bytes() for path in (tmp_path / "run").rglob("*") if path.is_file()]:
        assert USER.encode() not in blob
        assert base64.b64encode(f"{USER}:{PASSWORD}".encode()) not in blob


def test_userinfo_in_base_url_with_api_key_env_is_a_clear_error(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        ran = run_with_userinfo(tmp_path, server, "--api-key-env", "BENCHMAX_ECHO_KEY", BENCHMAX_ECHO_KEY=KEY)
        assert server.counts["requests"] == 0
    assert ran.returncode == 2, ran.stdout
    assert "Traceback" not in ran.stdout
    assert "carries credentials" in ran.stdout and "--api-key-env BENCHMAX_ECHO_KEY" in ran.stdout
    assert PASSWORD not in ran.stdout and quote(PASSWORD, safe="") not in ran.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "spec",
    [
        "http://127.0.0.1:9/?access_token=hunter2hunter2",
        "http://127.0.0.1:9/envs?api_key=hunter2hunter2",
        "http://alice:hunter2hunter2@127.0.0.1:9",
        "http://alice:hunter2hunter2@[::1/",
    ],
)
def test_a_served_env_url_with_a_token_is_refused_without_printing_the_token(tmp_path: Path, spec: str) -> None:
    ran = run_cli("eval", spec, "--base-url", "http://127.0.0.1:9/v1", "--no-progress", cwd=tmp_path)
    assert ran.returncode != 0
    assert "Traceback" not in ran.stdout, ran.stdout
    assert "hunter2" not in ran.stdout, ran.stdout


def replying_policy(body: dict[str, Any]) -> dict[str, Any]:
    """A model that repeats the key it was sent, in its answer and its reasoning, in several spellings."""
    message = {
        "role": "assistant",
        "content": f"1 (the key is {KEY})",
        "reasoning_content": f"hex {KEY.encode().hex()}, reversed {KEY[::-1]}, url {quote(KEY, safe='')}",
    }
    completion = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "model": "scripted"}
    return {"status": 200, "body": json.dumps(completion).encode()}


def test_a_key_echoed_in_a_successful_reply_is_masked_in_the_store_export_and_output(tmp_path: Path) -> None:
    write_split(tmp_path / "data", [row("1", f"q {index}") for index in range(3)])
    export = tmp_path / "export.jsonl"
    with ScriptedServer(policy=replying_policy) as server:
        ran = run_cli(
            "eval", ENV_SPEC, "--data-dir", tmp_path / "data", "--base-url", server.base_url,
            "--api-key-env", "BENCHMAX_ECHO_KEY", "--run-dir", tmp_path / "run", "--no-progress",
            env=cli_env(BENCHMAX_ECHO_KEY=KEY),
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout
    exported = run_cli("export", tmp_path / "run", "--output", export)
    assert exported.returncode == 0, exported.stdout
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert len(rows) == 3 and all("the key is ***" in json.dumps(item) for item in rows)
    assert leaks(KEY, tmp_path / "run", export, ran.stdout, exported.stdout) == []
    stored = b"".join(path.read_bytes() for path in (tmp_path / "run").rglob("*") if path.is_file())
    for form in (KEY.encode().hex(), KEY[::-1]):
        assert form[:PIECE].encode() not in stored + export.read_bytes()
