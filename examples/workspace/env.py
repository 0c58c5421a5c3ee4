"""File tasks in a private workspace: per-rollout resources through ``rollout_context``.

Each example names a fixture directory (``fixtures/<name>``). Before the model
sees the prompt, ``rollout_context`` copies that directory into a fresh temp
dir; the model works in it through ``list_files``/``read_file``/``write_file``;
``compute_reward`` (which runs inside the context) checks the file the task asks
for; then the temp dir is removed, however the rollout ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetError,
    DatasetSplit,
    Example,
    JsonlDataset,
    Tool,
    ToolError,
)

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List the files in the workspace (paths relative to its root).",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file from the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a text file in the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]


class WorkspaceEnv(BaseEnv):
    max_turns = 10
    max_tool_calls = 20

    def __init__(self, *, fixtures_dir: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fixtures_dir = Path(fixtures_dir or Path(__file__).parent / "fixtures").resolve()
        self._workspaces: dict[str, Path] = {}

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        def checked(row: dict[str, Any]) -> dict[str, Any]:
            # Fail at load time, with file:line, rather than in the middle of a run.
            fixture = row.get("fixture")
            if not isinstance(fixture, str) or not (self.fixtures_dir / fixture).is_dir():
                raise DatasetError(f"no fixture directory {fixture!r} in {self.fixtures_dir}")
            if not isinstance(row.get("check"), dict) or "path" not in row["check"]:
                raise DatasetError("'check' must be an object with a 'path'")
            return row

        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=checked, max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        root = Path(tempfile.mkdtemp(prefix="benchmax-workspace-"))
        try:
            source = self.fixtures_dir / example.payload["fixture"]
            await asyncio.to_thread(shutil.copytree, source, root, dirs_exist_ok=True)
            self._workspaces[rollout_id] = root.resolve()
            logger.info("workspace for %s at %s", rollout_id, root)
            yield
        finally:
            self._workspaces.pop(rollout_id, None)
            # Synchronous on purpose: it must finish even while the task is being cancelled.
            shutil.rmtree(root, ignore_errors=True)

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        root = self._workspaces[rollout_id]
        if tool_name == "list_files":
            return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
        path = _inside(root, tool_args.get("path"))
        if tool_name == "read_file":
            if not path.is_file():
                raise ToolError(f"no such file: {tool_args['path']}")
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ToolError(f"{tool_args['path']} is larger than {MAX_FILE_BYTES} bytes")
            return path.read_text(errors="replace")
        content = tool_args.get("content")
        if not isinstance(content, str):
            raise ToolError("write_file needs 'content' as a string")
        data = content.encode()
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"content is larger than {MAX_FILE_BYTES} bytes")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return f"wrote {len(data)} bytes to {path.relative_to(root)}"

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        root = self._workspaces[rollout.rollout_id]
        check = rollout.example_args["check"]
        target = root / check["path"]
        if not target.is_file():
            return {"correct": 0.0}
        text = target.read_text(errors="replace")
        if "json" in check:
            try:
                passed = json.loads(text) == check["json"]
            except ValueError:
                passed = False
        else:
            passed = text.strip() == check["equals"].strip()
        return {"correct": float(passed)}


def _inside(root: Path, path: object) -> Path:
    """``path`` resolved within ``root``; anything escaping it (``..``, absolute, links) is refused."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("'path' must be a non-empty string relative to the workspace")
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root) or resolved == root:
        raise ToolError(f"{path!r} is outside the workspace")
    return resolved
