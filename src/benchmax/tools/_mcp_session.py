"""One MCP client session, owned from start to end by a task of its own (see ``benchmax.tools.mcp``)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import tempfile
import time
from collections.abc import Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, suppress
from pathlib import Path
from typing import Any

from benchmax.envs import RolloutFailure, TerminationReason, ToolError
from benchmax.tools._mcp_sdk import ClientSession, MCPError, StdioServerParameters, anyio, mcp_types, stdio_client
from benchmax.tools._mcp_servers import MCP_ERROR, HttpServer, McpServer, StdioServer

logger = logging.getLogger("benchmax.tools.mcp")

_STDERR_TAIL = 800
_STOP_WAIT = 15.0
_MODEL_ERROR_CODES = frozenset({mcp_types.INVALID_PARAMS, mcp_types.METHOD_NOT_FOUND})


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
