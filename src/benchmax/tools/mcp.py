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
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any

from benchmax.envs import Tool, ToolError
from benchmax.tools._mcp_results import _NAME, _error_text, _openai_tools, _tool_result
from benchmax.tools._mcp_sdk import ClientSession
from benchmax.tools._mcp_servers import MCP_ERROR, HttpServer, McpServer, StdioServer
from benchmax.tools._mcp_session import _Session

__all__ = ["MCP_ERROR", "HttpServer", "McpServer", "McpTools", "StdioServer"]

logger = logging.getLogger("benchmax.tools.mcp")


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
