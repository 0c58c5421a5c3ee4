"""A real MCP server for the McpTools tests: every kind of result, error and failure on demand.

    python mcp_fixture_server.py [--transport http --port N]
"""

# No `from __future__ import annotations`: FastMCP in older mcp 1.x reads the tools' annotations as types.
import argparse
import asyncio
import base64
import os

import mcp.types as types

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n fake pixel").decode()

server = MCPServer("fixture", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Say ``text`` back."""
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers; the sum comes back as structured content."""
    return {"sum": a + b}


@server.tool()
def fail(message: str) -> str:
    """Always fails, with ``message``."""
    raise ToolError(message)


@server.tool()
def picture() -> list:
    """A caption and a tiny image."""
    return [
        types.TextContent.model_validate({"type": "text", "text": "a pixel"}),
        types.ImageContent.model_validate({"type": "image", "data": PIXEL, "mimeType": "image/png"}),
    ]


@server.tool()
def document() -> list:
    """An embedded text resource and a resource link."""
    return [
        types.EmbeddedResource.model_validate(
            {"type": "resource", "resource": {"uri": "file:///doc.txt", "mimeType": "text/plain", "text": "hello doc"}}
        ),
        types.ResourceLink.model_validate({"type": "resource_link", "name": "other", "uri": "file:///other.txt"}),
    ]


@server.tool(name="fixture.echo-2")
def dotted(text: str) -> str:
    """A tool whose MCP name has a dot in it."""
    return text.upper()


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool()
def crash(code: int = 3) -> str:
    """Die at once, mid-call, writing a last word to stderr."""
    os.write(2, f"fixture server crashing with code {code}\n".encode())
    os._exit(code)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        try:
            server.run("streamable-http", host="127.0.0.1", port=args.port)
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host, server.settings.port = "127.0.0.1", args.port
            server.run("streamable-http")


if __name__ == "__main__":
    main()
