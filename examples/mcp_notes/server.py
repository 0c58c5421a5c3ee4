"""A notes MCP server confined to one directory, built with the MCP SDK's high-level server.

Notes are UTF-8 text files under the root directory (``--root``, default: the
working directory). Every note name is resolved inside that root; a name that
escapes it (``..``, an absolute path, a symlink pointing out) is refused with a
tool error the model can read, and nothing outside the root is ever read or
written.

    python server.py --root /tmp/notes                      # stdio (one client)
    python server.py --root /tmp/notes --transport http --port 8765

Over HTTP the MCP endpoint is ``http://127.0.0.1:PORT/mcp``.
"""

# No `from __future__ import annotations`: FastMCP in older mcp 1.x reads the tools' annotations as types.
import argparse
import os
from pathlib import Path

try:  # mcp >= 2: FastMCP became MCPServer
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    _SDK_MAJOR = 2
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

    _SDK_MAJOR = 1

MAX_NOTE_BYTES = 64 * 1024
MAX_NOTES = 200

server = MCPServer("notes", instructions="Plain-text notes in one private directory.")
ROOT = Path.cwd().resolve()


def _note_path(name: str) -> Path:
    """``name`` resolved inside ROOT; anything that would land outside it is refused."""
    if not isinstance(name, str) or not name.strip():
        raise ToolError("a note name must be a non-empty relative path such as 'todo.md'")
    path = (ROOT / name).resolve()
    if not path.is_relative_to(ROOT) or path == ROOT:
        raise ToolError(f"{name!r} is outside the notes directory")
    return path


def _names() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file())


def _write(name: str, content: str) -> Path:
    path = _note_path(name)
    data = content.encode()
    if len(data) > MAX_NOTE_BYTES:
        raise ToolError(f"a note holds at most {MAX_NOTE_BYTES} bytes; this one would hold {len(data)}")
    if not path.exists() and len(_names()) >= MAX_NOTES:
        raise ToolError(f"there are already {MAX_NOTES} notes; delete one first")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@server.tool()
def list_notes() -> list[str]:
    """List the names of all notes."""
    return _names()


@server.tool()
def read_note(name: str) -> str:
    """Read a note's full text."""
    path = _note_path(name)
    if not path.is_file():
        raise ToolError(f"no note named {name!r}; call list_notes to see the names")
    return path.read_text(errors="replace")


@server.tool()
def write_note(name: str, content: str) -> str:
    """Create a note, or replace its whole text."""
    path = _write(name, content)
    return f"saved {path.relative_to(ROOT)} ({len(content.encode())} bytes)"


@server.tool()
def append_to_note(name: str, line: str) -> str:
    """Add one line at the end of a note (the note is created if it does not exist)."""
    path = _note_path(name)
    text = path.read_text(errors="replace") if path.is_file() else ""
    if text and not text.endswith("\n"):
        text += "\n"
    _write(name, f"{text}{line.rstrip(chr(10))}\n")
    return f"appended to {path.relative_to(ROOT)}"


@server.tool()
def delete_note(name: str) -> str:
    """Delete a note."""
    path = _note_path(name)
    if not path.is_file():
        raise ToolError(f"no note named {name!r}")
    path.unlink()
    return f"deleted {path.relative_to(ROOT)}"


@server.tool()
def search_notes(text: str) -> list[str]:
    """Find lines containing ``text`` (case-insensitive), as 'name:line: text'."""
    needle = text.lower()
    hits = []
    for name in _names():
        lines = (ROOT / name).read_text(errors="replace").splitlines()
        hits.extend(f"{name}:{number}: {line}" for number, line in enumerate(lines, 1) if needle in line.lower())
    return hits[:100]


def main() -> None:
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.getcwd(), help="the only directory notes live in")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    ROOT = Path(args.root).resolve()
    if not ROOT.is_dir():
        parser.error(f"--root {args.root!r} is not a directory")
    if args.transport == "stdio":
        server.run("stdio")
    elif _SDK_MAJOR >= 2:
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.settings.host = args.host
        server.settings.port = args.port
        server.run("streamable-http")


if __name__ == "__main__":
    main()
