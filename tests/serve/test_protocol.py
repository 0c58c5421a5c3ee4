"""The boundary of ``benchmax serve``: JSON checked with clear 4xx answers, bounded bodies, loopback or a token.

One real server process per test, spoken to with plain HTTP (httpx), as any
client in any language would.
"""

from __future__ import annotations

import os

import httpx
from serve_support import events, mixed_rows

from benchmax.remote import wire


def _example(server, index=0):
    page = httpx.get(f"{server.url}/dataset/eval", params={"offset": index, "limit": 1}).json()
    return page["examples"][0]


def test_the_listing_pages_a_split_in_order_with_stable_ids(serve_env):
    rows = mixed_rows()
    server = serve_env(rows)
    info = httpx.get(f"{server.url}/info").json()
    assert info["protocol"] == wire.PROTOCOL and info["hooks"] == {
        "compute_reward": True,
        "compute_group_rewards": True,
        "env_response": False,
    }
    assert info["limits"]["max_turns"] == 4
    first = httpx.get(f"{server.url}/dataset/eval", params={"limit": 4}).json()
    rest = httpx.get(f"{server.url}/dataset/eval", params={"offset": first["next_offset"], "limit": 4}).json()
    assert first["next_offset"] == 4 and rest["next_offset"] is None
    examples = first["examples"] + rest["examples"]
    assert [example["payload"] for example in examples] == rows
    again = httpx.get(f"{server.url}/dataset/eval", params={"offset": 2, "limit": 1}).json()
    assert again["examples"] == [examples[2]]
    capped = httpx.get(f"{server.url}/dataset/eval", params={"max_examples": 2, "limit": 10}).json()
    assert capped["examples"] == examples[:2] and capped["next_offset"] is None


def test_a_session_runs_tools_scores_and_tears_down_with_the_env_code_errors_as_answers(serve_env):
    server = serve_env(mixed_rows())
    example = _example(server)
    opened = server.http.post(f"{server.url}/sessions", json={"rollout_id": "r1", "example": example}).json()
    assert opened["rollout_id"] == "r1" and opened["tools"][0]["function"]["name"] == "add"
    assert opened["prompt_messages"] == example["payload"]["prompt_messages"]
    assert [entry["message"] for entry in opened["logs"]] == ["context entered for r1"]
    base = f"{server.url}/sessions/{opened['session_id']}"
    added = server.http.post(f"{base}/tools/add", json={"arguments": {"a": 2, "b": 3}}).json()
    assert added["result"] == '{"sum":5}' and added["logs"][0]["rollout_id"] == "r1"
    missing = server.http.post(f"{base}/tools/lookup", json={"arguments": {"key": "nope"}}).json()
    assert missing["error"] == {"code": "tool_error", "message": "no key 'nope'", "hook": "run_tool", "tool": "lookup"}
    crashed = server.http.post(f"{base}/tools/explode", json={"arguments": {}}).json()
    assert crashed["error"]["code"] == "hook_error" and crashed["error"]["exception"] == "RuntimeError"
    assert wire.failure_of(crashed["error"]) == ("tool_error", "tool 'explode' raised RuntimeError: the tool blew up")
    transcript = [*example["payload"]["prompt_messages"], {"role": "assistant", "content": "3"}]
    body = {"messages": transcript, "termination_reason": "finished", "split": "eval", "turns": []}
    assert server.http.post(f"{base}/reward", json=body).json()["rewards"] == {"correct": 1.0}
    assert httpx.get(base).json()["step_count"] == 3
    assert server.http.delete(base).json()["closed"] is True
    assert events(server.trace) == {"enter": 1, "exit": 1}
    gone = server.http.post(f"{base}/tools/add", json={"arguments": {"a": 1, "b": 1}})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "session_not_found"


def test_bad_bodies_get_4xx_answers_that_name_the_problem(serve_env):
    server = serve_env(mixed_rows(), "--max-request-bytes", "4096")
    post = f"{server.url}/sessions"
    cases = [
        (server.http.post(post, content=b"{not json", headers={"Content-Type": "application/json"}), 400, "not JSON"),
        (server.http.post(post, json=[1, 2]), 400, "must be a JSON object"),
        (server.http.post(post, json={"split": "test", "index": 0}), 400, "split must be one of"),
        (server.http.post(post, json={"split": "eval"}), 400, "one of index or example_id"),
        (server.http.post(post, json={"split": "eval", "index": 99}), 404, "no example at index 99"),
        (server.http.post(post, json={"example": {"payload": {}}}), 400, "example.id must be a non-empty string"),
        (server.http.post(post, json={"split": "eval", "index": 0, "pad": "x" * 5000}), 413, "--max-request-bytes"),
        (httpx.get(f"{server.url}/dataset/eval", params={"limit": "-1"}), 400, "limit must be an integer"),
        (httpx.get(f"{server.url}/nowhere"), 404, "/nowhere"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, response.text
        assert words in response.json()["error"]["message"], response.text
    opened = server.http.post(post, json={"split": "eval", "index": 0, "rollout_id": "twice"})
    again = server.http.post(post, json={"split": "eval", "index": 0, "rollout_id": "twice"})
    assert opened.status_code == 200 and again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    sid = opened.json()["session_id"]
    reserved = server.http.post(f"{server.url}/sessions/{sid}/tools/add", json={"arguments": {"rollout_id": "x"}})
    assert reserved.status_code == 400 and "reserved" in reserved.json()["error"]["message"]
    bad_reward = server.http.post(f"{server.url}/sessions/{sid}/reward", json={"messages": "no", "split": "eval"})
    assert bad_reward.status_code == 400 and "body.messages must be a list" in bad_reward.json()["error"]["message"]


def test_without_a_token_only_loopback_names_are_served(serve_env):
    server = serve_env(mixed_rows())
    refused = httpx.get(f"{server.url}/info", headers={"Host": "attacker.example"})
    assert refused.status_code == 403


def test_a_token_is_required_on_every_request_when_one_is_set(tmp_path, model, serve_env):
    token = "s3cret-token-for-tests"
    server = serve_env(mixed_rows(), "--token", token)
    assert httpx.get(f"{server.url}/info").status_code == 401
    assert httpx.get(f"{server.url}/info", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert httpx.get(f"{server.url}/info", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    from runkit import cli_env, run_cli

    refused = run_cli("eval", server.url, "--base-url", model.base_url, "--run-dir", tmp_path / "no", "--no-progress")
    assert refused.returncode == 2 and f"set {wire.TOKEN_ENV} to the server's token" in " ".join(refused.stdout.split())
    allowed = run_cli(
        "eval", server.url, "--base-url", model.base_url, "--run-dir", tmp_path / "yes", "--no-progress",
        "--max-failure-rate", "1", env=cli_env(**{wire.TOKEN_ENV: token}),
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stdout
    assert token not in (tmp_path / "yes" / "run.sqlite").read_bytes().decode("latin-1")
    assert os.environ.get(wire.TOKEN_ENV) is None
