"""An env served by ``benchmax serve`` elsewhere, driven here as if it were local.

``EnvSpec("http://HOST:PORT")`` loads a :class:`RemoteEnv`: a ``BaseEnv`` whose
hooks are HTTP calls. The standard loop runs here (the engine, the model
client, the store); the env's code runs there. ``create_dataset`` pages the
server's listing; ``rollout_context`` opens a session on the server (which
enters the env's own ``rollout_context``) and closes it on the way out;
``run_tool``, ``compute_reward`` and ``compute_group_rewards`` are calls.
Whatever the env code raised comes back as the same ``ToolError`` or the same
termination reason and error text a local run records (see :mod:`._wire`), and
the log records it emitted are logged again here, inside the rollout's capture.

A server that stops answering is neither the model's failure nor the env
code's: the rollout ends ``env_unavailable`` and :attr:`RemoteEnv.unavailable`
says why, so a run stops with whole groups stored and ``--resume`` goes on once
the server is back. No code is fetched: the env runs where it was served.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from benchmax.auth import redact_url
from benchmax.bounded import ReplyTooLarge, read_reply, read_reply_sync
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetError,
    DatasetSplit,
    EnvResponse,
    EnvSpecError,
    Example,
    JsonRow,
    RewardMap,
    RolloutFailure,
    TerminationReason,
    Tool,
    ToolError,
    ValidationDiagnostic,
    current_scope,
)
from benchmax.remote import wire

logger = logging.getLogger("benchmax.envs.remote")

INFO_TIMEOUT = 30.0
"""Seconds for the calls made while loading the env and paging its dataset."""
CONNECT_TIMEOUT = 10.0
PAGE_SIZE = 256
MAX_REPLY_BYTES = 256 * 1024 * 1024
"""The most bytes one answer of a served env may hold once decompressed (a page of examples, a
rollout's messages with their images): past it the read stops, and the call fails saying so."""
_ERROR_BODY_BYTES = 64 * 1024
"""What is read of an error answer: its message is one line."""
TEARDOWN_TIMEOUT = 30.0
"""Seconds a session's teardown may take before the proxy gives up on it (the server's TTL still ends it)."""


def is_remote_spec(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


def remote_env_class(url: str) -> type[RemoteEnv]:
    """A ``RemoteEnv`` class for the server at ``url``, shaped like the env it serves.

    Its limits and the scoring hooks it implements are the served env's, read from
    ``GET /info``, so the engine treats it exactly as it treats that env here.
    """
    base = _base_url(url)
    info = _get_json(base, "/info", what="load the env")
    if not isinstance(info, Mapping) or info.get("protocol") != wire.PROTOCOL:
        raise EnvSpecError(
            f"{base} is not a benchmax env server speaking {wire.PROTOCOL} "
            f"(it said protocol={info.get('protocol') if isinstance(info, Mapping) else None!r}); "
            "start one with: benchmax serve ENV --port PORT"
        )
    limits = info.get("limits") or {}
    hooks = info.get("hooks") or {}
    env_info = info.get("env") or {}
    namespace: dict[str, Any] = {
        "url": base,
        "info": info,
        "max_turns": limits.get("max_turns"),
        "max_tool_calls": limits.get("max_tool_calls"),
        "check_tool_arguments": bool(limits.get("check_tool_arguments", False)),
        "concurrent_tool_calls": bool(limits.get("concurrent_tool_calls", False)),
        "scorable_termination_reasons": frozenset(info.get("scorable_termination_reasons") or ()),
        "__module__": __name__,
        "__doc__": f"{env_info.get('class') or 'an env'} served at {base}.",
    }
    if hooks.get("compute_reward"):
        namespace["compute_reward"] = RemoteEnv._compute_reward
    if hooks.get("compute_group_rewards"):
        namespace["compute_group_rewards"] = RemoteEnv._compute_group_rewards
    if hooks.get("env_response"):
        namespace["env_response"] = RemoteEnv._env_response
        namespace["outcome_from_transcript"] = info.get("outcome_from_transcript")
    name = str(env_info.get("name") or "Env")
    cls = type(f"Remote{name if name.isidentifier() else 'Env'}", (RemoteEnv,), namespace)
    return cls


@dataclass(slots=True)
class _Session:
    id: str
    tools: list[Tool]
    ttl: float | None
    keepalive: asyncio.Task[None] | None = None
    lost: str | None = None
    notes: list[str] = field(default_factory=list)


class RemoteEnv(BaseEnv):
    """A ``BaseEnv`` whose hooks run on a ``benchmax serve`` server (see the module doc)."""

    url: str = ""
    info: Mapping[str, Any] = {}

    def __init__(self, **kwargs: Any) -> None:
        if kwargs:
            raise EnvSpecError(
                f"{self.url}: a served env was constructed on its server; pass --env-arg to "
                f"benchmax serve, not here (got {sorted(kwargs)})"
            )
        super().__init__()
        self._token = _token_for(self.url)
        self._sessions: dict[str, _Session] = {}
        self._http: Any = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self._down: str | None = None
        self._tools: list[Tool] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None

    @property
    def unavailable(self) -> str | None:
        return self._down

    def validation_diagnostics(self) -> Sequence[ValidationDiagnostic]:
        found = []
        for item in self.info.get("diagnostics") or ():
            if isinstance(item, Mapping) and item.get("severity") in ("warning", "error"):
                found.append(
                    ValidationDiagnostic(
                        item["severity"],
                        str(item.get("code") or ""),
                        str(item.get("message") or ""),
                        item.get("location"),
                    )
                )
        return found

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> RemoteDataset:
        """The server's examples of ``split``, paged as they are read (``base_dir`` is the server's own)."""
        return RemoteDataset(self.url, split, max_examples=max_examples, token=self._token)

    async def list_tools(self) -> list[Tool]:
        """The tools the rollout's session was opened with, else the server's current list."""
        rollout_id = current_scope().rollout_id
        session = self._sessions.get(rollout_id) if rollout_id else None
        if session is not None:
            return self._same_tools(session.tools)
        data = await self._call("GET", "/tools", rollout_id=None, hook="list_tools")
        return self._same_tools(list(data.get("tools") or []))

    async def tools_for(self, example: Example[JsonRow]) -> list[Tool]:
        """The rollout's own tools: the server resolved them with its env's ``tools_for(example)``
        when the session opened (outside a rollout, the server's ``list_tools()``)."""
        return await self.list_tools()

    def rollout_context(self, rollout_id: str, example: Example[JsonRow]) -> _RemoteSession:  # type: ignore[override]
        return _RemoteSession(self, rollout_id, example)

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        session = self._session(rollout_id)
        data = await self._call(
            "POST",
            f"/sessions/{session.id}/tools/{urllib.parse.quote(tool_name, safe='')}",
            {"arguments": tool_args},
            rollout_id=rollout_id,
            hook="run_tool",
        )
        error = data.get("error")
        if isinstance(error, Mapping):
            if error.get("code") == wire.ErrorCode.TOOL_ERROR:
                raise ToolError(str(error.get("message") or ""))
            raise RolloutFailure(*wire.failure_of(error))
        return data.get("result")

    async def _compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        session = self._session(rollout.rollout_id)
        body = wire.rollout_json(rollout)
        data = await self._call(
            "POST", f"/sessions/{session.id}/reward", body, rollout_id=rollout.rollout_id, hook="compute_reward"
        )
        return self._scored(data)

    async def _env_response(self, rollout: BaseRollout) -> EnvResponse | None:
        session = self._session(rollout.rollout_id)
        body = wire.rollout_json(rollout)
        data = await self._call(
            "POST", f"/sessions/{session.id}/env_response", body, rollout_id=rollout.rollout_id, hook="env_response"
        )
        error = data.get("error")
        if isinstance(error, Mapping):
            raise RolloutFailure(*wire.failure_of(error))
        try:
            return wire.env_response_from(data.get("response"))
        except wire.WireError as exc:
            raise RolloutFailure(TerminationReason.ENV_RESPONSE_ERROR, f"{self.url} env_response: {exc}") from None

    async def _compute_group_rewards(self, rollouts: Sequence[BaseRollout]) -> Any:
        body = {"rollouts": [wire.rollout_json(rollout) for rollout in rollouts]}
        data = await self._call("POST", "/group_rewards", body, rollout_id=None, hook="compute_group_rewards")
        return self._scored(data)

    async def aclose(self) -> None:
        for session in list(self._sessions.values()):
            if session.keepalive is not None:
                session.keepalive.cancel()
        if self._http is not None and self._http_loop is asyncio.get_running_loop():
            await self._http.close()
        self._http = None

    def _session_slots(self) -> asyncio.Semaphore | None:
        """The server's per-client session share (``max_sessions_per_client`` of ``/info``), so a
        rollout waits for a session here instead of being refused there (which stops the run)."""
        share = self.info.get("max_sessions_per_client")
        if isinstance(share, bool) or not isinstance(share, int) or share < 1:
            return None
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(share), loop
        return self._slots

    # The calls.

    def _scored(self, data: Mapping[str, Any]) -> Any:
        error = data.get("error")
        if isinstance(error, Mapping):
            raise RolloutFailure(*wire.failure_of(error))
        return data.get("rewards")

    def _session(self, rollout_id: str) -> _Session:
        session = self._sessions.get(rollout_id)
        if session is None:
            raise RolloutFailure(
                TerminationReason.HARNESS_ERROR,
                f"rollout {rollout_id!r} has no open session on {self.url} (it is opened by rollout_context)",
            )
        if session.lost is not None:
            raise self._unavailable(session.lost)
        return session

    def _same_tools(self, tools: list[Tool]) -> list[Tool]:
        """One list object while the server's tools stay the same: the engine checks each new list once."""
        if self._tools is None or self._tools != tools:
            self._tools = tools
        return self._tools

    def _unavailable(self, why: str) -> RolloutFailure:
        if self._down is None:
            self._down = why
        return RolloutFailure(TerminationReason.ENV_UNAVAILABLE, why)

    async def _client(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop or self._http.closed:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
                headers=_headers(self._token),
                json_serialize=lambda value: orjson.dumps(value).decode(),
            )
            self._http_loop = loop
        return self._http

    async def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        rollout_id: str | None,
        hook: str,
        timeout: float | None = None,
    ) -> Mapping[str, Any]:
        """One call; its logs are logged again here; a protocol error raises what a run records."""
        import aiohttp

        if self._down is not None:
            raise RolloutFailure(TerminationReason.ENV_UNAVAILABLE, self._down)
        http = await self._client()
        payload = None if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        try:
            async with asyncio.timeout(timeout):
                async with http.request(
                    method,
                    self.url + path,
                    data=payload,
                    headers={"Content-Type": "application/json"} if payload is not None else None,
                ) as response:
                    status = response.status
                    raw = await read_reply(
                        response, limit=MAX_REPLY_BYTES, what=f"of the env server at {self.url} to {hook}"
                    )
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as exc:
            raise self._unavailable(
                f"the env server at {self.url} stopped answering during {hook} ({type(exc).__name__}: {exc})"
            ) from None
        except ReplyTooLarge as exc:
            raise RolloutFailure(TerminationReason.HARNESS_ERROR, str(exc)) from None
        try:
            data = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, Mapping):
            raise RolloutFailure(
                TerminationReason.HARNESS_ERROR,
                f"the env server at {self.url} answered {hook} with HTTP {status} and no JSON object: "
                f"{raw[:200].decode('utf-8', 'replace')!r}",
            )
        wire.emit_logs(data.get("logs"))
        if status >= 400:
            raise self._protocol_error(status, data, hook)
        return data

    def _protocol_error(self, status: int, data: Mapping[str, Any], hook: str) -> RolloutFailure:
        error = data.get("error") if isinstance(data.get("error"), Mapping) else {}
        code = error.get("code")
        message = str(error.get("message") or f"HTTP {status}")
        if code in (wire.ErrorCode.SESSION_NOT_FOUND, wire.ErrorCode.CAPACITY) or status in (502, 503, 504):
            return self._unavailable(f"the env server at {self.url} refused {hook}: {message}")
        if status in (401, 403):
            return self._unavailable(
                f"the env server at {self.url} refused {hook} (HTTP {status}): {message}; "
                f"set {wire.TOKEN_ENV} to its token"
            )
        return RolloutFailure(
            TerminationReason.HARNESS_ERROR, f"the env server at {self.url} refused {hook} (HTTP {status}): {message}"
        )

    async def _keepalive(self, session: _Session) -> None:
        """Keep an idle session open while the model thinks: the server ends sessions idle past their TTL."""
        assert session.ttl is not None
        while True:
            await asyncio.sleep(max(0.05, session.ttl / 3))
            try:
                await self._call(
                    "POST",
                    f"/sessions/{session.id}/keepalive",
                    {},
                    rollout_id=None,
                    hook="keepalive",
                    timeout=session.ttl,
                )
            except RolloutFailure as exc:
                session.lost = exc.message
                return


class _RemoteSession:
    """``rollout_context`` of a remote env: the server's session for one rollout, closed on every way out."""

    def __init__(self, env: RemoteEnv, rollout_id: str, example: Example[JsonRow]) -> None:
        self.env = env
        self.rollout_id = rollout_id
        self.example = example
        self.slots: asyncio.Semaphore | None = None

    async def __aenter__(self) -> None:
        env = self.env
        self.slots = env._session_slots()
        if self.slots is not None:
            await self.slots.acquire()
        try:
            await self._open()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        slots, self.slots = self.slots, None
        if slots is not None:
            slots.release()

    async def _open(self) -> None:
        env = self.env
        body = {"rollout_id": self.rollout_id, "example": wire.example_json(self.example)}
        data = await env._call("POST", "/sessions", body, rollout_id=self.rollout_id, hook="rollout_context")
        error = data.get("error")
        if isinstance(error, Mapping):
            raise RolloutFailure(*wire.failure_of(error))
        ttl = data.get("ttl_seconds")
        session = _Session(
            id=str(data["session_id"]),
            tools=list(data.get("tools") or []),
            ttl=float(ttl) if isinstance(ttl, int | float) and ttl > 0 else None,
        )
        env._sessions[self.rollout_id] = session
        if session.ttl is not None:
            session.keepalive = asyncio.get_running_loop().create_task(env._keepalive(session))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._close()
        finally:
            self._release()

    async def _close(self) -> None:
        env = self.env
        session = env._sessions.pop(self.rollout_id, None)
        if session is None:
            return
        if session.keepalive is not None:
            session.keepalive.cancel()
        if env._down is not None:
            raise RolloutFailure(TerminationReason.ENV_UNAVAILABLE, env._down)
        data = await env._call(
            "DELETE",
            f"/sessions/{session.id}",
            None,
            rollout_id=self.rollout_id,
            hook="rollout_context",
            timeout=TEARDOWN_TIMEOUT,
        )
        if session.lost is not None:
            raise env._unavailable(session.lost)
        error = data.get("error")
        if isinstance(error, Mapping):
            raise RolloutFailure(*wire.failure_of(error))


class RemoteDataset:
    """A split of a served env, read page by page each time it is iterated (no second copy here)."""

    def __init__(
        self, url: str, split: DatasetSplit, *, max_examples: int | None, token: str | None, page_size: int = PAGE_SIZE
    ) -> None:
        self.url = url
        self.split = split
        self.max_examples = max_examples
        self.page_size = page_size
        self._token = token

    def __iter__(self) -> Iterator[Example[Any]]:
        offset: int | None = 0
        while offset is not None:
            query = {"offset": offset, "limit": self.page_size}
            if self.max_examples is not None:
                query["max_examples"] = self.max_examples
            page = _get_json(
                self.url,
                f"/dataset/{self.split}?{urllib.parse.urlencode(query)}",
                what="read its dataset",
                token=self._token,
            )
            examples = page.get("examples") if isinstance(page, Mapping) else None
            if not isinstance(examples, list):
                raise DatasetError(f"{self.url}: the dataset page at offset {offset} holds no examples list")
            for index, item in enumerate(examples):
                try:
                    yield wire.example_from(item, f"{self.url} {self.split}[{offset + index}]")
                except wire.WireError as exc:
                    raise DatasetError(str(exc)) from None
            following = page.get("next_offset")
            offset = following if isinstance(following, int) and following > offset else None

    def __repr__(self) -> str:
        return f"RemoteDataset({self.url}, {self.split!r})"


def _base_url(url: str) -> str:
    shown = redact_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        hostname = parts.hostname
    except ValueError:
        raise EnvSpecError(f"{shown}: not a URL; a served env is named by http(s)://HOST:PORT") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise EnvSpecError(f"{shown}: a served env is named by http(s)://HOST:PORT")
    if parts.username or parts.password or shown != url:
        raise EnvSpecError(
            f"{shown}: put the token in {wire.TOKEN_ENV}, not in the URL (the URL is shown and stored in the run)"
        )
    if parts.query or parts.fragment or parts.path.strip("/"):
        raise EnvSpecError(
            f"{shown}: env code is never fetched; download it, review it, and pass its local path. "
            "For an env served by benchmax serve, give the server's root, http(s)://HOST:PORT, "
            "without a path or query"
        )
    return f"{parts.scheme}://{parts.netloc}"


def _token_for(base: str) -> str | None:
    """``BENCHMAX_SERVE_TOKEN``; else, for a server on this machine, the token ``benchmax serve``
    generated and keeps in a file only this user can read (a web page or another user cannot)."""
    token = os.environ.get(wire.TOKEN_ENV)
    if token:
        return token
    parts = urllib.parse.urlsplit(base)
    host = (parts.hostname or "").strip("[]")
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if not local or parts.port is None:
        return None
    try:
        return wire.token_path(parts.port).read_text().strip() or None
    except OSError:
        return None


def _headers(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _get_json(base: str, path: str, *, what: str, token: str | None = None) -> Any:
    """A blocking ``GET``: loading an env and reading its dataset are synchronous in the contract."""
    token = token if token is not None else _token_for(base)
    request = urllib.request.Request(base + path, headers=_headers(token))
    try:
        with urllib.request.urlopen(request, timeout=INFO_TIMEOUT) as response:
            return json.loads(
                read_reply_sync(
                    response,
                    limit=MAX_REPLY_BYTES,
                    what=f"of the env server at {base} to {path}",
                    encoding=response.headers.get("Content-Encoding"),
                )
            )
    except urllib.error.HTTPError as exc:
        message = _error_message(exc)
        if exc.code in (401, 403):
            raise EnvSpecError(
                f"{base} refused to {what} (HTTP {exc.code}: {message}); set {wire.TOKEN_ENV} to the server's token"
            ) from None
        if exc.code in (400, 404, 422) and path.startswith("/dataset/"):
            raise DatasetError(f"{base}: {message}") from None
        raise EnvSpecError(f"{base} could not {what} (HTTP {exc.code}: {message})") from None
    except ReplyTooLarge as exc:
        raise EnvSpecError(f"{base} could not {what}: {exc}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EnvSpecError(
            f"cannot reach the env server at {base} to {what} ({reason}); start it with: benchmax serve ENV --port PORT"
        ) from None


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(read_reply_sync(exc, limit=_ERROR_BODY_BYTES, what="of an error") or b"{}")
    except ValueError:  # not JSON, or larger than an error message is (ReplyTooLarge)
        return exc.reason or ""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        return str(error.get("message") or exc.reason)
    return str(exc.reason)
