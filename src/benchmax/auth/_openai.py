"""The OpenAI SDK adapters: SDK clients whose every request a ``ModelAuth`` signs.

They need ``pip install 'benchmax[openai]'``; httpx and the SDK are imported on
first use, so that ``import benchmax.auth`` stays free of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from benchmax.aio import block_on
from benchmax.auth._providers import ModelAuth, ModelRequestContext

if TYPE_CHECKING:
    import httpx
    from openai import AsyncOpenAI, OpenAI


def _resolve_headers_sync(auth: ModelAuth, context: ModelRequestContext) -> Mapping[str, str]:
    """Run ``auth.headers_for_request`` from synchronous code (a sync SDK client, maybe called
    from an async tool): :func:`benchmax.aio.block_on` keeps :func:`bind_model_auth` bindings
    visible. Providers used this way must not rely on objects tied to the caller's loop."""
    return block_on(_resolve(auth, context), name="benchmax-model-auth")


async def _resolve(auth: ModelAuth, context: ModelRequestContext) -> Mapping[str, str]:
    return await auth.headers_for_request(context)


@functools.cache
def request_auth_class() -> type[httpx.Auth]:
    """``RequestModelAuth``, made on first use so that httpx loads only then."""
    try:
        import httpx
    except ImportError as exc:
        raise ImportError("RequestModelAuth needs httpx; install it with pip install 'benchmax[openai]'") from exc

    class RequestModelAuth(httpx.Auth):
        """An ``httpx.Auth`` that asks a :class:`ModelAuth` for headers before each request.

        Sync and async httpx clients (and so both OpenAI SDK clients) can use it;
        credentials never come from an SDK environment variable.
        """

        def __init__(self, auth: ModelAuth, context: ModelRequestContext) -> None:
            if not isinstance(auth, ModelAuth):
                raise TypeError("request auth must implement ModelAuth")
            self._auth = auth
            self._context = context

        def sync_auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
            request.headers.update(_resolve_headers_sync(self._auth, self._context))
            yield request

        async def async_auth_flow(self, request: httpx.Request):  # type: ignore[override]
            request.headers.update(await self._auth.headers_for_request(self._context))
            yield request

    RequestModelAuth.__module__ = "benchmax.auth"
    return RequestModelAuth


def _openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            "create_openai_client needs the OpenAI SDK; install it with pip install 'benchmax[openai]'"
        ) from exc
    return openai


def create_openai_client(
    *, model: str, base_url: str, auth: ModelAuth, request_id: str, max_retries: int = 2
) -> OpenAI:
    """A synchronous OpenAI SDK client whose every request is authorised by ``auth``."""
    import httpx

    openai = _openai()
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id=request_id)
    return openai.OpenAI(
        base_url=base_url,
        api_key="benchmax-explicit-auth",  # the SDK insists on one; the real header comes from auth
        http_client=httpx.Client(auth=request_auth_class()(auth, context)),
        max_retries=max_retries,
    )


def create_async_openai_client(
    *, model: str, base_url: str, auth: ModelAuth, request_id: str, max_retries: int = 2
) -> AsyncOpenAI:
    """An asynchronous OpenAI SDK client whose every request is authorised by ``auth``."""
    import httpx

    openai = _openai()
    context = ModelRequestContext(base_url=base_url, model=model, rollout_id=request_id)
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key="benchmax-explicit-auth",
        http_client=httpx.AsyncClient(auth=request_auth_class()(auth, context)),
        max_retries=max_retries,
    )
