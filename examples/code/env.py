"""Write a program, try it in a sandbox, be scored on hidden tests.

Each task states a stdin/stdout problem with one visible example. The model may
call ``run_python(code, stdin)`` as often as it likes: the code runs inside the
rollout's own sandbox (``benchmax.sandbox``: bubblewrap by default, so no host
files, no network, wall-clock, memory and disk limits), started by
``rollout_context`` and stopped when the rollout ends, so files a run writes
(a helper module, a data file) are there for the next run and for no other
rollout. The final answer is the last fenced Python block; ``tests_passed`` is
the fraction of the task's hidden tests it passes, each run in a fresh sandbox.
"""

from __future__ import annotations

import asyncio
import logging
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
    RolloutFailure,
    Tool,
    ToolError,
)
from benchmax.rewards import CodeTest, code_pass_rate, extract_code_block, extract_completion_text
from benchmax.sandbox import Limits, RolloutSandboxes, SandboxError, SandboxResult, SandboxSpec, run_python_async

logger = logging.getLogger(__name__)

MAX_SHOWN_CHARS = 4000
"""How much of a run's stdout and of its stderr the model sees."""

TOOLS: list[Tool] = [
    {
        "type": "function",
        "function": {
            "name": "run_python",
            "description": (
                "Run a Python program and see its exit code, stdout and stderr. It runs in a "
                "sandbox whose working directory keeps files between runs; no network."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The whole program."},
                    "stdin": {"type": "string", "description": "Text fed to standard input."},
                },
                "required": ["code"],
                "additionalProperties": False,
            },
        },
    }
]


def row_to_example(row: dict[str, Any]) -> dict[str, Any]:
    """Check a task row at load time: a prompt, a name and at least one well-formed test."""
    tests = row.get("tests")
    if not isinstance(tests, list) or not tests:
        raise DatasetError("'tests' must be a non-empty list of {stdin, expected_stdout} objects")
    for index, test in enumerate(tests):
        try:
            CodeTest(**test)
        except (TypeError, ValueError) as exc:
            raise DatasetError(f"tests[{index}]: {exc}") from None
    if not isinstance(row.get("name"), str):
        raise DatasetError("'name' must be a string")
    return row


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "\n…[cut]"


class CodeEnv(BaseEnv):
    """``timeout`` (seconds) and ``memory_mb`` bound every run, the model's and the tests'."""

    max_turns = 8
    max_tool_calls = 12

    def __init__(self, *, timeout: float = 5.0, memory_mb: int = 256, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        if memory_mb < 64:
            raise ValueError(f"memory_mb must be at least 64 (the interpreter needs it), got {memory_mb!r}")
        self.timeout = float(timeout)
        self.memory_mb = int(memory_mb)
        self._sandboxes = RolloutSandboxes(SandboxSpec(limits=Limits(disk_mb=64, tmp_mb=64)))
        # fail at load, with the install command, rather than in every rollout
        _ = self._sandboxes.provider
        self._locks: dict[str, asyncio.Lock] = {}

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{split}.jsonl", row_to_example=row_to_example, max_examples=max_examples)

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        try:
            async with self._sandboxes.open(rollout_id) as sandbox:
                self._locks[rollout_id] = asyncio.Lock()
                logger.info("sandbox for %s is %s", rollout_id, sandbox.id)
                yield
        except SandboxError as exc:
            raise RolloutFailure("sandbox_error", str(exc)) from exc
        finally:
            self._locks.pop(rollout_id, None)

    async def aclose(self) -> None:
        await self._sandboxes.aclose()

    async def list_tools(self) -> list[Tool]:
        return TOOLS

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if tool_name != "run_python":
            raise ToolError(f"unknown tool {tool_name!r}; the only tool is run_python")
        code = tool_args["code"]
        stdin = tool_args.get("stdin") or ""
        # One run at a time per rollout: runs share the sandbox's workspace and its main.py.
        async with self._locks[rollout_id]:
            try:
                run = await run_python_async(
                    code,
                    stdin=stdin,
                    timeout=self.timeout,
                    memory_mb=self.memory_mb,
                    sandbox=self._sandboxes[rollout_id],
                )
            except SandboxError as exc:
                raise RolloutFailure("sandbox_error", str(exc)) from exc
        return self._report(run)

    def _report(self, run: SandboxResult) -> dict[str, Any]:
        """What the model sees; a hit limit is a tool error that says which limit."""
        if run.timed_out:
            raise ToolError(f"the program ran past the {self.timeout:g} s time limit and was stopped")
        if run.memory_error:
            raise ToolError(f"the program ran out of memory (limit {self.memory_mb} MB)")
        if run.output_truncated:
            raise ToolError("the program wrote more output than the 1 MiB limit and was stopped")
        return {"exit_code": run.exit_code, "stdout": _shown(run.stdout), "stderr": _shown(run.stderr)}

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        program = extract_code_block(extract_completion_text(rollout.messages), "python")
        tests = [CodeTest(**test) for test in rollout.example_args["tests"]]
        rate = await code_pass_rate(program, tests, timeout=self.timeout, memory_mb=self.memory_mb)
        return {"tests_passed": rate}
