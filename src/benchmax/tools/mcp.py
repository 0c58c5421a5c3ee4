"""The tools of any MCP server as benchmax ``list_tools``/``run_tool``.

An env author keeps one :class:`McpTools` and forwards three hooks to it::

    class NotesEnv(BaseEnv):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.mcp = McpTools(StdioServer(sys.executable, ["server.py"]), per_rollout=True)

        @asynccontextmanager
        async def rollout_context(self, rollout_id, example):
            async with self.mcp.session(rollout_id):
                yield

        async def list_tools(self):
            return await self.mcp.list_tools()

        async def run_tool(self, rollout_id, tool_name, **tool_args):
            return await self.mcp.call(rollout_id, tool_name, tool_args)

        async def aclose(self):
            await self.mcp.aclose()

MCP tool schemas become OpenAI function tools; call results become what the
model sees (text, images, embedded resources, structured content); a tool that
reports ``isError`` raises :class:`~benchmax.envs.ToolError`, so the model reads
the error and goes on; a server that cannot be started, dies or stops answering
ends the rollout with ``RolloutFailure("mcp_error", ...)`` naming the server,
the call and the tail of its stderr.

Each session runs in a task of its own. The SDK's transports are anyio context
managers that must be entered and left by one task, and a rollout's task may be
cancelled at any await; the session task is stopped through its own anyio cancel
scope instead, so the SDK's shielded shutdown (stdin closed, then terminate and
kill) always runs to the end, even when the rollout that owned it was cancelled.

Works with the SDK's 1.x and 2.x lines: results are read in their wire form
(``isError``, ``structuredContent``), which both lines dump identically.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import re
import shlex
import tempfile
import time
from collections.abc import AsyncIterator, Collection, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import orjson

from benchmax.envs import RolloutFailure, TerminationReason, Tool, ToolError

try:
    import anyio
    import mcp.types as mcp_types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        f"benchmax.tools.mcp needs the MCP SDK ({exc}); install it with: pip install 'benchmax[mcp]'"
    ) from exc

try:  # mcp >= 2
    from mcp.shared.exceptions import MCPError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as MCPError  # type: ignore[attr-defined,no-redef]

__all__ = ["MCP_ERROR", "HttpServer", "McpServer", "McpTools", "StdioServer"]

logger = logging.getLogger("benchmax.tools.mcp")

MCP_ERROR = "mcp_error"
"""The termination reason of a rollout whose MCP server failed."""

_STDERR_TAIL = 800
_STOP_WAIT = 15.0
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MODEL_ERROR_CODES = frozenset({mcp_types.INVALID_PARAMS, mcp_types.METHOD_NOT_FOUND})


@dataclass(frozen=True, slots=True)
class StdioServer:
    """An MCP server the env starts as a subprocess and talks to over stdin/stdout.

    ``env`` is merged over the SDK's minimal default environment (``PATH``,
    ``HOME``...), so secrets in the parent's environment are not passed on
    unless named here.
    """

    command: str
    args: Sequence[str] = ()
    cwd: str | Path | None = None
    env: Mapping[str, str] | None = None

    def describe(self) -> str:
        return shlex.join([self.command, *map(str, self.args)])


@dataclass(frozen=True, slots=True)
class HttpServer:
    """An MCP server already listening on streamable HTTP, e.g. ``http://127.0.0.1:8765/mcp``.

    ``headers`` (an ``Authorization`` token, say) are sent with every request and
    never logged.
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)

    def describe(self) -> str:
        return self.url


McpServer: TypeAlias = StdioServer | HttpServer


class McpTools:
    """One MCP server's tools for an env: listing, calling, and per-rollout sessions.

    ``per_rollout=True`` gives each rollout a session of its own, opened by
    :meth:`session` (for a stdio server: a process of its own, stopped when the
    rollout ends however it ends). ``per_rollout=False`` shares one session
    among all rollouts, opened on first use, reopened after the server died,
    and closed by :meth:`aclose`.

    ``call_timeout`` bounds each tool call, ``start_timeout`` the start and MCP
    handshake. ``prefix`` is put before every tool name the model sees (to keep
    two servers' tools apart); ``include`` keeps only the named MCP tools.
    ``prefer_structured`` sends the model a tool's ``structuredContent`` as JSON
    rather than its text content, when it has both.
    """

    def __init__(
        self,
        server: McpServer,
        *,
        per_rollout: bool = True,
        call_timeout: float | None = 60.0,
        start_timeout: float = 30.0,
        prefix: str = "",
        include: Collection[str] | None = None,
        prefer_structured: bool = False,
    ) -> None:
        if not isinstance(server, StdioServer | HttpServer):
            raise TypeError(f"server must be a StdioServer or an HttpServer, got {type(server).__name__}")
        for name, value in (("call_timeout", call_timeout), ("start_timeout", start_timeout)):
            if value is not None and not value > 0:
                raise ValueError(f"McpTools {name} must be > 0 seconds, got {value!r}")
        if prefix and _NAME.search(prefix):
            raise ValueError(f"McpTools prefix may hold only letters, digits, '_' and '-', got {prefix!r}")
        self.server = server
        self.per_rollout = per_rollout
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.prefix = prefix
        self.include = frozenset(include) if include is not None else None
        self.prefer_structured = prefer_structured
        self._tools: list[Tool] | None = None
        self._mcp_names: dict[str, str] = {}
        self._sessions: dict[str, _Session] = {}
        self._shared: _Session | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listing_lock = asyncio.Lock()
        self._shared_lock = asyncio.Lock()

    async def list_tools(self) -> list[Tool]:
        """The server's tools as OpenAI function tools, listed once and then cached.

        Listed through a live session when there is one; otherwise a short-lived
        session is opened just to list them (``benchmax validate`` and the
        engine's start-up check call this before any rollout).
        """
        if self._tools is not None:
            return self._tools
        self._bind_loop()
        async with self._listing_lock:
            if self._tools is None:
                live = next((s for s in self._sessions.values() if s.alive), None)
                if live is None and not self.per_rollout:
                    live = await self._shared_session()
                if live is not None:
                    listing = await live.list_tools()
                else:
                    probe = _Session(self.server, "tool listing")
                    await probe.start(self.start_timeout)
                    try:
                        listing = await probe.list_tools()
                    finally:
                        await probe.stop()
                self._tools, self._mcp_names = _openai_tools(listing, self.prefix, self.include)
        return self._tools

    @asynccontextmanager
    async def session(self, rollout_id: str, *, server: McpServer | None = None) -> AsyncIterator[ClientSession]:
        """The rollout's MCP session for the duration of the block; use it in ``rollout_context``.

        ``server`` overrides the default server for this rollout (a per-rollout
        working directory, say); only with ``per_rollout=True``. Yields the SDK's
        ``ClientSession`` for anything beyond tools (resources, prompts).
        Raises ``RolloutFailure("mcp_error")`` when the server cannot be started.
        """
        self._bind_loop()
        if rollout_id in self._sessions:
            raise RuntimeError(f"rollout {rollout_id!r} already has an MCP session")
        if not self.per_rollout:
            if server is not None:
                raise ValueError("a shared MCP session (per_rollout=False) always uses the McpTools server")
            live = await self._shared_session()
            self._sessions[rollout_id] = live
            try:
                yield live.client
            finally:
                self._sessions.pop(rollout_id, None)
            return
        live = _Session(server or self.server, f"rollout {rollout_id}")
        await live.start(self.start_timeout)
        self._sessions[rollout_id] = live
        try:
            yield live.client
        finally:
            self._sessions.pop(rollout_id, None)
            await live.stop()

    async def call(self, rollout_id: str, name: str, arguments: Mapping[str, Any] | None = None) -> str | list[Any]:
        """Call tool ``name`` (as the model saw it) in the rollout's session; returns what the model sees.

        Raises :class:`ToolError` when the tool reports an error (the model reads
        it), ``RolloutFailure("mcp_error")`` when the server failed, and
        ``RolloutFailure("timeout")`` past ``call_timeout``.
        """
        live = self._sessions.get(rollout_id)
        if live is None:
            if self.per_rollout:
                raise RuntimeError(
                    f"no MCP session for rollout {rollout_id!r}: open one with "
                    "`async with mcp_tools.session(rollout_id)` in rollout_context"
                )
            self._bind_loop()
            live = await self._shared_session()
        if self._tools is None:
            await self.list_tools()
        mcp_name = self._mcp_names.get(name)
        if mcp_name is None:
            raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(sorted(self._mcp_names)) or 'none'}")
        result = await live.call(mcp_name, dict(arguments or {}), self.call_timeout)
        if result.get("isError"):
            raise ToolError(_error_text(result))
        return _tool_result(result, prefer_structured=self.prefer_structured)

    async def aclose(self) -> None:
        """Stop the shared session and any session a caller left open."""
        sessions = {id(s): s for s in [*self._sessions.values(), *filter(None, [self._shared])]}
        self._sessions.clear()
        self._shared = None
        for live in sessions.values():
            await live.stop()

    async def _shared_session(self) -> _Session:
        async with self._shared_lock:
            shared = self._shared
            if shared is not None and shared.alive:
                return shared
            if shared is not None:
                logger.warning("restarting the shared MCP session: %s", shared.failure or "it ended")
                await shared.stop()
            shared = _Session(self.server, "shared session")
            await shared.start(self.start_timeout)
            self._shared = shared
            return shared

    def _bind_loop(self) -> None:
        """Sessions belong to one event loop; a new loop (a second ``asyncio.run``) starts afresh."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._listing_lock = asyncio.Lock()
            self._shared_lock = asyncio.Lock()
            self._sessions.clear()
            self._shared = None


_closing: set[asyncio.Task[None]] = set()
"""Session tasks still shutting down after their owner stopped waiting (kept alive until done)."""


class _Session:
    """One MCP client session, owned from start to end by a task of its own."""

    def __init__(self, server: McpServer, label: str) -> None:
        self.server = server
        self.label = label
        self.client: ClientSession = None  # type: ignore[assignment]  # set once ready
        self.failure: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopping = False
        self._stderr: Path | None = None
        self._stderr_tail: str | None = None

    @property
    def alive(self) -> bool:
        return self.failure is None and not self._stopping and self._task is not None and not self._task.done()

    def describe(self) -> str:
        kind = "stdio" if isinstance(self.server, StdioServer) else "HTTP"
        return f"MCP server `{self.server.describe()}` ({kind}, {self.label})"

    async def start(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        started = time.perf_counter()
        self._task = loop.create_task(self._run(timeout), name=f"benchmax {self.describe()}")
        try:
            await asyncio.shield(self._ready)
        except BaseException:
            await self.stop()
            raise
        logger.info("started %s in %.2fs", self.describe(), time.perf_counter() - started)

    async def stop(self) -> None:
        """Stop the session task and wait (bounded) for the server to be shut down."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # seen here, so asyncio does not report it as never retrieved
        task = self._task
        if task is None or task.done():
            return
        _closing.add(task)
        task.add_done_callback(_closing.discard)
        try:
            await asyncio.wait_for(asyncio.shield(task), _STOP_WAIT)
        except TimeoutError:
            logger.warning("%s took more than %gs to shut down", self.describe(), _STOP_WAIT)
        except Exception:
            logger.debug("shutting down %s failed", self.describe(), exc_info=True)

    async def _run(self, start_timeout: float) -> None:
        ready = self._ready
        assert ready is not None
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + start_timeout) as scope:
                self._scope = scope
                if self._stopping:
                    scope.cancel()
                async with AsyncExitStack() as stack:
                    streams = await stack.enter_async_context(self._transport(stack))
                    self.client = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                    await self.client.initialize()
                    scope.deadline = math.inf
                    ready.set_result(None)
                    await anyio.sleep_forever()
            if not ready.done():
                what = (
                    "was stopped while starting"
                    if self._stopping
                    else f"did not finish the MCP handshake within {start_timeout:g}s"
                )
                ready.set_exception(RolloutFailure(MCP_ERROR, self._explain(f"{self.describe()} {what}")))
        except Exception as exc:
            reason = _reason(exc)
            if not ready.done():
                ready.set_exception(
                    RolloutFailure(MCP_ERROR, self._explain(f"{self.describe()} could not be started: {reason}"))
                )
            elif self._stopping:
                logger.debug("%s raised while shutting down", self.describe(), exc_info=True)
            else:
                self.failure = self._explain(f"{self.describe()} failed: {reason}")
                logger.error("%s", self.failure)
        finally:
            if not ready.done():  # the task itself was cancelled (the event loop is closing)
                ready.set_exception(RolloutFailure(MCP_ERROR, f"{self.describe()} was cancelled while starting"))
            if self._stderr is not None:
                self._stderr_tail = _tail(self._stderr)  # a caller may still explain a failure with it
                with suppress(OSError):
                    self._stderr.unlink()

    def _transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Sequence[Any]]:
        server = self.server
        if isinstance(server, StdioServer):
            fd, name = tempfile.mkstemp(prefix="benchmax-mcp-", suffix=".stderr")
            os.close(fd)
            self._stderr = Path(name)
            # Append mode: the server's writes land at the end while we read the tail by path.
            errlog = stack.enter_context(open(name, "a", encoding="utf-8"))  # noqa: SIM115
            parameters = StdioServerParameters(
                command=server.command,
                args=[str(arg) for arg in server.args],
                cwd=str(server.cwd) if server.cwd is not None else None,
                env=dict(server.env) if server.env is not None else None,
            )
            return stdio_client(parameters, errlog=errlog)
        return _http_client(server, stack)

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        # mcp >= 1.2x pages with ``params=``; older 1.x with ``cursor=``.
        by_params = "params" in inspect.signature(self.client.list_tools).parameters
        page_args: dict[str, Any] = {}
        for _ in range(100):
            page = _wire(await self._request("tools/list", self.client.list_tools, **page_args))
            tools.extend(page.get("tools") or [])
            cursor = page.get("nextCursor")
            if not cursor:
                return tools
            page_args = {"params": mcp_types.PaginatedRequestParams(cursor=cursor)} if by_params else {"cursor": cursor}
        raise RolloutFailure(MCP_ERROR, f"{self.describe()} kept paging tools/list past 100 pages")

    async def call(self, name: str, arguments: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout) as deadline:
                result = await self._request(f"tools/call {name!r}", self.client.call_tool, name, arguments)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise RolloutFailure(
                TerminationReason.TIMEOUT, f"{self.describe()} did not answer tools/call {name!r} within {timeout:g}s"
            ) from None
        return _wire(result)

    async def _request(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.alive:
            raise RolloutFailure(MCP_ERROR, self.failure or f"{self.describe()} is not running (before {what})")
        try:
            return await self._unless_the_session_ends(what, method(*args, **kwargs))
        except MCPError as exc:
            code = exc.error.code
            if code == mcp_types.CONNECTION_CLOSED:
                self.failure = self._explain(
                    f"{self.describe()} closed the connection during {what} (the server exited or crashed)"
                )
                raise RolloutFailure(MCP_ERROR, self.failure) from None
            if code in _MODEL_ERROR_CODES:
                raise ToolError(exc.error.message) from None
            raise RolloutFailure(
                MCP_ERROR, f"{self.describe()} answered {what} with error {code}: {exc.error.message}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            self.failure = self._explain(f"{self.describe()} connection broke during {what}: {_reason(exc)}")
            raise RolloutFailure(MCP_ERROR, self.failure) from None
        except Exception as exc:
            raise RolloutFailure(MCP_ERROR, f"{self.describe()}: {what} failed: {_reason(exc)}") from None

    async def _unless_the_session_ends(self, what: str, request: Coroutine[Any, Any, Any]) -> Any:
        """Await ``request``, or fail as soon as the session task ends.

        Some SDK versions leave a request pending when the transport dies under
        it (an HTTP server gone mid-call); the session task does notice, so the
        call fails now with the reason instead of waiting for its timeout.
        """
        pending = asyncio.ensure_future(request)
        session_task = self._task
        assert session_task is not None
        try:
            await asyncio.wait({pending, session_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not pending.done():
                pending.cancel()
                pending.add_done_callback(_retrieve)
        if pending.done() and not pending.cancelled():
            return pending.result()
        self.failure = self.failure or self._explain(f"{self.describe()} ended during {what}")
        raise RolloutFailure(MCP_ERROR, f"{self.failure} (during {what})")

    def _explain(self, message: str) -> str:
        """``message`` plus the end of the server's stderr, where the reason usually is."""
        tail = self._stderr_tail
        if tail is None:
            tail = _tail(self._stderr) if self._stderr is not None else ""
        return f"{message}; its stderr ends with:\n{tail}" if tail else message


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a dropped request's outcome as seen, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _http_client(server: HttpServer, stack: AsyncExitStack) -> AbstractAsyncContextManager[Sequence[Any]]:
    import mcp.client.streamable_http as streamable_http

    connect = getattr(streamable_http, "streamable_http_client", None)
    headers = dict(server.headers or {})
    if connect is None or (headers and not hasattr(streamable_http, "create_mcp_http_client")):
        # mcp 1.x before streamable_http_client (or without a way to pass headers to it).
        return streamable_http.streamablehttp_client(server.url, headers=headers or None)
    if not headers:
        return connect(server.url)
    http_client = streamable_http.create_mcp_http_client(headers=headers)
    stack.push_async_callback(http_client.aclose)
    return connect(server.url, http_client=http_client)


def _openai_tools(
    listing: list[dict[str, Any]], prefix: str, include: frozenset[str] | None
) -> tuple[list[Tool], dict[str, str]]:
    """MCP tool declarations as OpenAI function tools, and the exposed name -> MCP name map.

    Names are made to fit OpenAI's ``[A-Za-z0-9_-]{1,64}`` (other characters become
    ``_``; a clash gets a numeric suffix), so every model server accepts them.
    """
    tools: list[Tool] = []
    names: dict[str, str] = {}
    for item in listing:
        mcp_name = item.get("name")
        if not isinstance(mcp_name, str) or (include is not None and mcp_name not in include):
            continue
        exposed = (prefix + _NAME.sub("_", mcp_name))[:64] or "tool"
        stem, number = exposed, 2
        while exposed in names:
            suffix = f"_{number}"
            exposed, number = stem[: 64 - len(suffix)] + suffix, number + 1
        names[exposed] = mcp_name
        schema = dict(item.get("inputSchema") or {})
        for noise in ("$schema", "title"):
            schema.pop(noise, None)
        schema["type"] = schema.get("type", "object")
        schema.setdefault("properties", {})
        description = item.get("description") or item.get("title") or ""
        tools.append(
            {
                "type": "function",
                "function": {"name": exposed, "description": description, "parameters": schema},
            }
        )
    return tools, names


def _tool_result(result: Mapping[str, Any], *, prefer_structured: bool) -> str | list[Any]:
    """A ``CallToolResult`` as the model sees it: plain text when it is all text, else content parts."""
    structured = result.get("structuredContent")
    content = result.get("content") or []
    if structured is not None and (prefer_structured or not content):
        return orjson.dumps(structured).decode()
    parts = [_content_part(item) for item in content if isinstance(item, Mapping)]
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _content_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """One MCP content block as an OpenAI content part (what chat models accept in a tool message)."""
    kind = item.get("type")
    if kind == "text":
        return _text(str(item.get("text", "")))
    if kind == "image":
        return _image(item.get("mimeType") or "image/png", str(item.get("data", "")))
    if kind == "resource":
        resource = item.get("resource") or {}
        uri = resource.get("uri", "")
        mime = resource.get("mimeType") or ""
        if "text" in resource:
            return _text(f"[resource {uri}]\n{resource['text']}")
        blob = str(resource.get("blob", ""))
        if mime.startswith("image/"):
            return _image(mime, blob)
        return _text(f"[resource {uri}: {mime or 'binary'}, {len(blob) * 3 // 4} bytes, not shown]")
    if kind == "resource_link":
        return _text(f"[resource link {item.get('name', '')}: {item.get('uri', '')}]")
    if kind == "audio":
        return _text(f"[audio {item.get('mimeType', '')}, {len(str(item.get('data', ''))) * 3 // 4} bytes, not shown]")
    return _text(f"[{kind} content, not shown]")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image(mime: str, data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _error_text(result: Mapping[str, Any]) -> str:
    parts = [_content_part(item) for item in result.get("content") or [] if isinstance(item, Mapping)]
    text = "\n".join(part["text"] for part in parts if part["type"] == "text").strip()
    return text or "the tool reported an error without a message"


def _wire(result: Any) -> dict[str, Any]:
    """An SDK result in its JSON-RPC form (camelCase in both SDK lines)."""
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def _reason(exc: BaseException) -> str:
    """The innermost, most telling exception of an (exception-group) chain, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - _STDERR_TAIL))
            data = file.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").strip()
    return ("…" + text) if size > _STDERR_TAIL else text
