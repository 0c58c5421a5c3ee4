"""Model auth resolved per request: static keys, injected providers, and the OpenAI SDK adapters."""

from __future__ import annotations

import asyncio
import itertools
import pickle
from collections.abc import Mapping

import pytest

from benchmax.auth import (
    BasicAuth,
    EnvironmentKeyAuth,
    InjectedAuth,
    ModelAuth,
    ModelAuthError,
    ModelRequestContext,
    StaticBearerAuth,
    bind_model_auth,
    bound_model_auth,
    create_async_openai_client,
    create_openai_client,
    portable_model_auth,
)
from benchmax.testing import ScriptedServer

CONTEXT = ModelRequestContext(base_url="http://h/v1", model="m", rollout_id="r1")


class RotatingAuth:
    """A provider whose token changes on every request, and which remembers what it was asked."""

    def __init__(self) -> None:
        self.counter = itertools.count(1)
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer token-{next(self.counter)}", "X-Rollout": context.rollout_id}


async def test_a_static_key_takes_the_positional_token_or_api_key_and_never_shows_it():
    positional, keyword = StaticBearerAuth("sk-secret"), StaticBearerAuth(api_key="sk-secret")
    assert positional == keyword
    assert positional.token == keyword.api_key == "sk-secret"
    assert "sk-secret" not in repr(positional)
    assert await positional.headers_for_request(CONTEXT) == {"Authorization": "Bearer sk-secret"}
    assert positional.headers() == {"Authorization": "Bearer sk-secret"}
    assert pickle.loads(pickle.dumps(positional)) == positional
    assert isinstance(positional, ModelAuth)


def test_a_static_key_must_be_given_once_and_non_empty():
    with pytest.raises(ValueError, match="non-empty"):
        StaticBearerAuth("")
    with pytest.raises(ValueError, match="non-empty"):
        StaticBearerAuth()
    with pytest.raises(TypeError, match="give the key once"):
        StaticBearerAuth("a", api_key="b")


def test_a_static_key_can_come_from_an_environment_variable(monkeypatch):
    monkeypatch.setenv("BENCHMAX_AUTH_TEST_KEY", "sk-env")
    assert StaticBearerAuth.from_env("BENCHMAX_AUTH_TEST_KEY").token == "sk-env"
    monkeypatch.setenv("BENCHMAX_AUTH_TEST_KEY", "")
    with pytest.raises(ValueError, match="BENCHMAX_AUTH_TEST_KEY is not set"):
        StaticBearerAuth.from_env("BENCHMAX_AUTH_TEST_KEY")


async def test_injected_auth_answers_with_the_provider_bound_in_the_current_context():
    judge = InjectedAuth("judge")
    provider = RotatingAuth()
    with pytest.raises(RuntimeError, match="No runtime model-auth provider was injected for 'judge'"):
        await judge.headers_for_request(CONTEXT)
    with bind_model_auth({"judge": provider}):
        first = await judge.headers_for_request(CONTEXT)
        # Tasks started inside the binding inherit it.
        second = await asyncio.create_task(judge.headers_for_request(CONTEXT))
    assert first["Authorization"] == "Bearer token-1"
    assert second["Authorization"] == "Bearer token-2"
    assert provider.contexts == [CONTEXT, CONTEXT]
    with pytest.raises(RuntimeError, match="No runtime model-auth provider"):
        await judge.headers_for_request(CONTEXT)


async def test_bindings_nest_and_end_with_their_block_even_on_error():
    outer, inner = StaticBearerAuth("outer"), StaticBearerAuth("inner")
    auth = InjectedAuth("llm")
    with bind_model_auth({"llm": outer}):
        with pytest.raises(KeyError), bind_model_auth({"llm": inner}):
            assert (await auth.headers_for_request(CONTEXT))["Authorization"] == "Bearer inner"
            raise KeyError("boom")
        assert (await auth.headers_for_request(CONTEXT))["Authorization"] == "Bearer outer"


async def test_an_injected_provider_cannot_be_another_injection_and_bindings_are_checked():
    with bind_model_auth({"judge": InjectedAuth("other")}), pytest.raises(RuntimeError, match="cannot reference"):
        await InjectedAuth("judge").headers_for_request(CONTEXT)
    with pytest.raises(TypeError, match="does not implement ModelAuth"), bind_model_auth({"judge": "sk-raw"}):
        pass
    with pytest.raises(ValueError, match="non-empty"), bind_model_auth({" ": StaticBearerAuth("k")}):
        pass
    with pytest.raises(ValueError, match="non-empty"):
        InjectedAuth("")
    assert pickle.loads(pickle.dumps(InjectedAuth("judge"))) == InjectedAuth("judge")


async def test_the_async_sdk_client_sends_fresh_headers_on_every_request():
    provider = RotatingAuth()
    with ScriptedServer(lambda body: {"content": "ok"}) as server:
        client = create_async_openai_client(model="m", base_url=server.base_url, auth=provider, request_id="rid-7")
        try:
            for _ in range(2):
                reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                assert reply.choices[0].message.content == "ok"
        finally:
            await client.close()
        sent = [headers["Authorization"] for headers in server.headers]
        rollouts = {headers["X-Rollout"] for headers in server.headers}
    assert sent == ["Bearer token-1", "Bearer token-2"]
    assert rollouts == {"rid-7"}
    assert provider.contexts[0] == ModelRequestContext(base_url=server.base_url, model="m", rollout_id="rid-7")


async def test_the_sync_sdk_client_resolves_async_auth_even_inside_a_running_loop():
    with ScriptedServer(lambda body: {"content": "ok"}) as server:
        client = create_openai_client(
            model="m", base_url=server.base_url, auth=InjectedAuth("embedding"), request_id="sync"
        )
        # Called from async code (as a sync embedding function inside a tool is): the auth
        # coroutine runs on a helper thread that still sees the binding.
        with bind_model_auth({"embedding": StaticBearerAuth("sk-sync")}):
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        client.close()
        assert reply.choices[0].message.content == "ok"
        assert server.headers[-1]["Authorization"] == "Bearer sk-sync"


def test_the_request_auth_adapter_loads_on_first_use():
    import httpx

    from benchmax.auth import RequestModelAuth

    assert issubclass(RequestModelAuth, httpx.Auth)
    with pytest.raises(TypeError, match="must implement ModelAuth"):
        RequestModelAuth("sk-raw", CONTEXT)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:p%40ss@h.example:8443/v1", "https://h.example:8443/v1"),
        ("https://h.example/v1?api-version=2024&api_key=abc", "https://h.example/v1?api-version=2024&api_key=***"),
        ("http://h:1/?access_token=x#id_token=y", "http://h:1/?access_token=***#id_token=***"),
        ("http://a:b@[::1/broken", "http://[::1/broken"),
        ("embedded", "embedded"),
    ],
)
def test_redact_url_drops_user_info_and_masks_credential_parameters(url: str, shown: str) -> None:
    from benchmax.auth import redact_url

    assert redact_url(url) == shown


def test_split_credentials_gives_basic_auth_that_never_shows() -> None:
    from benchmax.auth import BasicAuth, split_credentials

    url, credentials = split_credentials("https://alice:p%40ss@h.example/v1?x=1")
    assert (url, credentials) == ("https://h.example/v1?x=1", BasicAuth("alice", "p@ss"))
    assert "p@ss" not in repr(credentials) and "alice" not in repr(credentials)
    assert split_credentials("https://h.example/v1") == ("https://h.example/v1", None)


def test_the_bindings_of_this_context_are_what_a_worker_process_must_be_sent():
    judge = EnvironmentKeyAuth("MY_JUDGE_KEY", "http://judge/v1")
    assert bound_model_auth() == {}
    with bind_model_auth({"judge": judge}):
        assert bound_model_auth() == {"judge": judge}
    assert bound_model_auth() == {}


def test_only_providers_that_hold_no_key_may_be_sent_to_worker_processes(monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-judge-in-the-environment")
    judge = EnvironmentKeyAuth("MY_JUDGE_KEY", "http://judge/v1")

    sent = pickle.dumps(portable_model_auth({"judge": judge}, where="Ray actors"))

    assert b"sk-judge-in-the-environment" not in sent
    assert pickle.loads(sent) == {"judge": judge}
    for holding in (StaticBearerAuth("sk-held-in-the-object"), BasicAuth("user", "sk-held-in-the-object")):
        with pytest.raises(ModelAuthError) as refused:
            portable_model_auth({"judge": judge, "policy": holding}, where="Ray actors")
        message = str(refused.value)
        assert "InjectedAuth('policy')" in message and "Ray actors" in message and "--auth policy=URL@" in message
        assert "sk-held-in-the-object" not in message
