"""Note-taking tasks against a real MCP server: tools come from ``benchmax.tools.mcp``.

Every rollout gets a fresh temp dir seeded with the example's notes and its own
``server.py`` process (an MCP server over stdio, confined to that dir). The
model only ever sees the server's MCP tools; ``compute_reward`` (which runs
inside the rollout's context) reads the notes the server wrote on disk; then the
server is stopped and the dir removed, however the rollout ended.
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from benchmax.envs import BaseEnv, BaseRollout, DatasetError, DatasetSplit, Example, JsonlDataset, Tool
from benchmax.tools.mcp import McpTools, StdioServer

logger = logging.getLogger(__name__)

SERVER = Path(__file__).resolve().with_name("server.py")
CHECK_KINDS = ("lines", "contains", "absent")


class McpNotesEnv(BaseEnv):
    max_turns = 8
    max_tool_calls = 16

    def __init__(self, *, python: str = sys.executable, call_timeout: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.python = python
        # Listing the tools before any rollout runs the server once in the temp root; it calls no tool.
        self.mcp = McpTools(self._server(Path(tempfile.gettempdir())), per_rollout=True, call_timeout=call_timeout)
        self._roots: dict[str, Path] = {}

    def _server(self, root: Path) -> StdioServer:
        return StdioServer(self.python, [str(SERVER), "--root", str(root)], cwd=root)

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=_checked, max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        root = Path(tempfile.mkdtemp(prefix="benchmax-notes-")).resolve()
        try:
            for name, text in example.payload.get("notes", {}).items():
                path = root / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            logger.info("notes for %s at %s", rollout_id, root)
            self._roots[rollout_id] = root
            async with self.mcp.session(rollout_id, server=self._server(root)):
                yield
        finally:
            self._roots.pop(rollout_id, None)
            # Synchronous on purpose: it must finish even while the task is being cancelled.
            shutil.rmtree(root, ignore_errors=True)

    async def list_tools(self) -> list[Tool]:
        return await self.mcp.list_tools()

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return await self.mcp.call(rollout_id, tool_name, tool_args)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        root = self._roots[rollout.rollout_id]
        checks = rollout.example_args["check"]
        correct = all(_passes(root, check) for check in checks)
        named = {check.get("note") or check.get("absent") for check in checks}
        seeds = {name: text for name, text in rollout.example_args.get("notes", {}).items() if name not in named}
        untouched = all(_read(root / name) == text for name, text in seeds.items())
        return {"correct": float(correct), "untouched": float(untouched)}

    async def aclose(self) -> None:
        await self.mcp.aclose()


def _passes(root: Path, check: dict[str, Any]) -> bool:
    if "absent" in check:
        return not (root / check["absent"]).exists()
    text = _read(root / check["note"])
    if text is None:
        return False
    if "lines" in check:
        return _lines(text) == [_normal(line) for line in check["lines"]]
    return all(_normal(part) in text.casefold() for part in check["contains"])


def _read(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


def _lines(text: str) -> list[str]:
    """The note's non-blank lines, compared without case, outer spaces or a list bullet."""
    return [_normal(line) for line in text.splitlines() if line.strip()]


def _normal(line: str) -> str:
    line = line.strip()
    for bullet in ("- ", "* "):
        line = line.removeprefix(bullet)
    return line.strip().casefold()


def _checked(row: dict[str, Any]) -> dict[str, Any]:
    """Reject a malformed row at load time (``JsonlDataset`` adds ``file:line``)."""
    notes = row.get("notes", {})
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        raise DatasetError("'notes' must map note names to their text")
    checks = row.get("check")
    if not isinstance(checks, list) or not checks:
        raise DatasetError("'check' must be a non-empty list of checks")
    for index, check in enumerate(checks):
        kinds = [kind for kind in CHECK_KINDS if kind in check] if isinstance(check, dict) else []
        if len(kinds) != 1 or (kinds[0] != "absent") != ("note" in check):
            raise DatasetError(
                f"check[{index}] must be {{'note', 'lines'}}, {{'note', 'contains'}} or {{'absent'}}, got {check!r}"
            )
    for name in [*notes, *(c.get("note") or c.get("absent") for c in checks)]:
        path = PurePosixPath(name) if isinstance(name, str) else None
        if path is None or not name or path.is_absolute() or ".." in path.parts:
            raise DatasetError(f"note name {name!r} must be a relative path inside the notes dir")
    return row
