"""Fix a bug in a tiny repository with a shell, inside a sandbox; be scored by hidden tests.

Each example is a small Python project (a module, a ``tests/`` directory with a
test the bug makes fail, a README) and an issue describing the bug. The model
works in the rollout's own sandbox (``benchmax.sandbox``: bubblewrap by default,
no network, none of the host's files) with three tools: ``shell``, ``read_file``
and ``write_file``. When it stops, the reward is computed in the same sandbox:
every process the model left is killed, the tests directory is put back to its
original content plus the hidden tests, and those run. ``hidden_tests`` is the
fraction of hidden tests that pass; ``tests_untouched`` is 1.0 when the model
left the tests exactly as they were.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetError,
    DatasetSplit,
    Example,
    JsonlDataset,
    RolloutFailure,
    Tool,
    ToolError,
)
from benchmax.sandbox import Limits, RolloutSandboxes, Sandbox, SandboxError, SandboxSpec

logger = logging.getLogger(__name__)

MAX_SHOWN_CHARS = 4000
"""How much of a command's stdout and of its stderr the model sees."""
MAX_FILE_BYTES = 100_000
"""The largest file ``read_file`` shows or ``write_file`` takes."""
TESTS_DIR = "tests"

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command in the repository and see its exit code, stdout and stderr.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "A command for /bin/sh."}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Show a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Path relative to the repository."}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or replace a file of the repository with the given content.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the repository."},
                    "content": {"type": "string", "description": "The whole new content of the file."},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
    },
]

GRADER = """
import io, json, os, sys, unittest
nonce = sys.stdin.readline().strip()
sys.path.append(os.getcwd())  # after the standard library: the repository cannot shadow it
suite = unittest.defaultTestLoader.discover("tests", pattern="test_hidden_*.py", top_level_dir="tests")
result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
print(json.dumps({"nonce": nonce, "run": result.testsRun, "failed": failed}))
"""
"""Runs the hidden tests with ``python -I`` (no user site, no cwd on ``sys.path`` first).

The nonce arrives on stdin, so a program cannot print a fake result line by
reading it from argv or the environment. Code of the repository runs in the
same process as the tests, so a repository rewritten to subvert ``unittest``
itself could still fake a pass: ``tests_untouched`` and the transcript are the
checks on that.
"""


def _files(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise DatasetError(f"{field!r} must be a non-empty object of path -> file content")
    for path, content in value.items():
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not isinstance(content, str):
            raise DatasetError(f"{field}[{path!r}]: paths must be relative without '..', contents strings")
    return value


def row_to_example(row: dict[str, Any]) -> dict[str, Any]:
    """Check a task at load time: a repository with tests, hidden tests, a name."""
    repo = _files(row.get("repo"), "repo")
    hidden = _files(row.get("hidden_tests"), "hidden_tests")
    if not any(PurePosixPath(path).parts[0] == TESTS_DIR for path in repo):
        raise DatasetError(f"'repo' must have a {TESTS_DIR}/ directory with the visible tests")
    for path in hidden:
        pure = PurePosixPath(path)
        if pure.parts[0] != TESTS_DIR or not pure.name.startswith("test_hidden_"):
            raise DatasetError(f"hidden_tests[{path!r}] must be {TESTS_DIR}/test_hidden_*.py")
    if not isinstance(row.get("name"), str):
        raise DatasetError("'name' must be a string")
    return row


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "\n…[cut]"


def _digest(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return digest.hexdigest()


class SweEnv(BaseEnv):
    """``command_timeout`` bounds each shell command (seconds); ``warm`` keeps that many sandboxes started ahead."""

    max_turns = 12
    max_tool_calls = 20

    def __init__(self, *, command_timeout: float = 30.0, warm: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not command_timeout > 0:
            raise ValueError(f"command_timeout must be positive seconds, got {command_timeout!r}")
        self.command_timeout = float(command_timeout)
        limits = Limits(cpu_seconds=120, memory_mb=1024, processes=128, disk_mb=64, tmp_mb=64)
        self._sandboxes = RolloutSandboxes(SandboxSpec(limits=limits), warm=warm)
        if self._sandboxes.provider.name == "guard":
            raise ValueError(
                "the swe env runs shell commands: it needs a real sandbox (bwrap or docker), not the guard"
            )

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=row_to_example, max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        try:
            async with self._sandboxes.open(rollout_id, files=example.payload["repo"]) as sandbox:
                logger.info("sandbox for %s is %s", rollout_id, sandbox.id)
                yield
        except SandboxError as exc:
            raise RolloutFailure("sandbox_error", str(exc)) from exc

    async def aclose(self) -> None:
        await self._sandboxes.aclose()

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        sandbox = self._sandboxes[rollout_id]
        try:
            if tool_name == "shell":
                return await self._shell(sandbox, str(tool_args["command"]))
            if tool_name == "read_file":
                return await self._read(sandbox, str(tool_args["path"]))
            if tool_name == "write_file":
                return await self._write(sandbox, str(tool_args["path"]), str(tool_args["content"]))
        except SandboxError as exc:
            raise RolloutFailure("sandbox_error", str(exc)) from exc
        raise ToolError(f"unknown tool {tool_name!r}; the tools are shell, read_file and write_file")

    async def _shell(self, sandbox: Sandbox, command: str) -> dict[str, Any]:
        if not command.strip():
            raise ToolError("the command is empty")
        result = await sandbox.exec(command, timeout=self.command_timeout)
        if result.timed_out:
            raise ToolError(f"the command ran past the {self.command_timeout:g} s limit and was stopped")
        if result.output_truncated:
            raise ToolError("the command wrote more than 1 MiB of output and was stopped")
        return {"exit_code": result.exit_code, "stdout": _shown(result.stdout), "stderr": _shown(result.stderr)}

    async def _read(self, sandbox: Sandbox, path: str) -> str:
        try:
            data = await sandbox.read_file(path, max_bytes=MAX_FILE_BYTES)
        except FileNotFoundError:
            raise ToolError(f"no such file: {path}") from None
        except IsADirectoryError:
            raise ToolError(f"{path} is a directory; list it with shell('ls {path}')") from None
        except ValueError:
            raise ToolError(f"{path} is larger than {MAX_FILE_BYTES} bytes; look at parts of it with shell") from None
        return data.decode("utf-8", "replace")

    async def _write(self, sandbox: Sandbox, path: str, content: str) -> str:
        data = content.encode()
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"the content is larger than {MAX_FILE_BYTES} bytes")
        try:
            await sandbox.write_file(path, data)
        except (PermissionError, OSError) as exc:
            raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
        return f"wrote {len(data)} bytes to {path}"

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        sandbox = self._sandboxes[rollout.rollout_id]
        repo: dict[str, str] = rollout.example_args["repo"]
        hidden: dict[str, str] = rollout.example_args["hidden_tests"]
        try:
            await sandbox.terminate_processes()  # nothing the model started may act during grading
            untouched = await self._tests_untouched(sandbox, repo)
            await sandbox.exec(["rm", "-rf", TESTS_DIR], timeout=30)
            originals = {path: text for path, text in repo.items() if PurePosixPath(path).parts[0] == TESTS_DIR}
            await sandbox.write_files({**originals, **hidden})
            passed = await self._hidden_pass_rate(sandbox)
        except SandboxError as exc:
            raise RolloutFailure("sandbox_error", f"grading failed: {exc}") from exc
        return {"hidden_tests": passed, "tests_untouched": untouched}

    async def _tests_untouched(self, sandbox: Sandbox, repo: Mapping[str, str]) -> float:
        expected = {path: text.encode() for path, text in repo.items() if PurePosixPath(path).parts[0] == TESTS_DIR}
        try:
            entries = await sandbox.list_files(TESTS_DIR, recursive=True)
        except (FileNotFoundError, NotADirectoryError):
            return 0.0
        found: dict[str, bytes] = {}
        for entry in entries:
            if "__pycache__" in PurePosixPath(entry.path).parts or entry.type == "dir":
                continue
            if entry.type != "file":
                return 0.0
            found[f"{TESTS_DIR}/{entry.path}"] = await sandbox.read_file(f"{TESTS_DIR}/{entry.path}")
        return float(_digest(found) == _digest(expected))

    async def _hidden_pass_rate(self, sandbox: Sandbox) -> float:
        nonce = secrets.token_hex(16)
        python = getattr(sandbox, "python", "python3")
        result = await sandbox.exec([python, "-I", "-c", GRADER], stdin=nonce + "\n", timeout=120)
        for line in reversed(result.stdout.splitlines()):
            try:
                report = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(report, dict) and report.get("nonce") == nonce and report.get("run"):
                logger.info("hidden tests: %d run, %d failed", report["run"], report["failed"])
                return max(0.0, (report["run"] - report["failed"]) / report["run"])
        logger.info("hidden tests produced no result (exit %s): %s", result.exit_code, result.stderr[-500:])
        return 0.0
