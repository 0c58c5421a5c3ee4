"""Naming a served env: ``EnvSpec("http://HOST:PORT")`` loads a proxy shaped like the served env, or says why not."""

from __future__ import annotations

import pytest
from runkit import run_cli
from serve_support import mixed_rows

from benchmax.envs import EnvSpecError, implements
from benchmax.loading import EnvSpec
from benchmax.remote import RemoteEnv
from benchmax.testing import ScriptedServer, free_port


def test_the_proxy_takes_the_served_envs_limits_and_scoring_hooks(serve_env):
    server = serve_env(mixed_rows())
    env = EnvSpec(server.url).load()
    assert isinstance(env, RemoteEnv) and type(env).__name__ == "RemoteServedEnv"
    assert env.max_turns == 4 and env.max_tool_calls is None
    assert implements(env, "compute_reward") and implements(env, "compute_group_rewards")
    assert not implements(env, "run_rollout")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:{port}/v1", "without a path or query"),
        ("http://127.0.0.1:{port}/?token=abc", "put the token in BENCHMAX_SERVE_TOKEN"),
        ("http://user:pw@127.0.0.1:{port}", "put the token in BENCHMAX_SERVE_TOKEN"),
        ("http://127.0.0.1:{port}", "cannot reach the env server"),
        ("ftp://127.0.0.1:{port}", "never fetched"),
    ],
)
def test_a_spec_that_names_no_usable_server_says_what_to_do(url, words):
    with pytest.raises(EnvSpecError, match=words):
        EnvSpec(url.format(port=free_port())).load()


def test_a_server_that_is_not_benchmax_serve_is_refused():
    with ScriptedServer() as other, pytest.raises(EnvSpecError, match="could not load the env"):
        EnvSpec(f"http://127.0.0.1:{other.port}").load()


def test_constructor_arguments_belong_to_the_server(serve_env):
    server = serve_env(mixed_rows())
    with pytest.raises(EnvSpecError, match="pass --env-arg to benchmax serve"):
        EnvSpec(server.url, {"trace_dir": "x"}).load()


def test_serve_refuses_what_it_cannot_serve(tmp_path):
    harness = tmp_path / "harness.py"
    harness.write_text(
        "from benchmax.envs import BaseEnv, ListDataset\n"
        "class Harness(BaseEnv):\n"
        "    max_turns = 1\n"
        "    async def create_dataset(self, split, base_dir, *, max_examples=None):\n"
        "        return ListDataset([])\n"
        "    async def run_rollout(self, request):\n"
        "        return await super().run_rollout(request)\n"
    )
    own = run_cli("serve", harness, "--port", "0")
    assert own.returncode == 2 and "implements its own run_rollout" in own.stdout
    url = run_cli("serve", "http://127.0.0.1:9", "--port", "0")
    assert url.returncode == 2 and "takes a local env" in url.stdout
