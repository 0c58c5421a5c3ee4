"""The MCP servers an env can name: one it starts over stdio, or one already listening on HTTP."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

MCP_ERROR = "mcp_error"
"""The termination reason of a rollout whose MCP server failed."""


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
