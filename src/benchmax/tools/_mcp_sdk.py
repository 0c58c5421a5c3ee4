"""The MCP SDK, imported once with the install hint; its 1.x and 2.x lines name the error class differently."""

from __future__ import annotations

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

__all__ = ["ClientSession", "MCPError", "StdioServerParameters", "anyio", "mcp_types", "stdio_client"]
