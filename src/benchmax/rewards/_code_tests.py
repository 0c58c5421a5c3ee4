"""Scoring a candidate program by running it against test cases in the sandbox.

Each test runs in its own :func:`benchmax.sandbox.run_python` call: a fresh
sandbox (bubblewrap by default: no host files, no network, time, memory and
disk limits), all of them concurrently and without blocking the event loop.
The reward is the fraction of tests passed. A sandbox that cannot start raises
``RolloutFailure("sandbox_error", …)``: an infrastructure fault is not a
wrong program.

A test with a ``check`` is not ``code + check`` run as one program, where the
program could end the process with status 0 before the check ran
(``os._exit(0)``, ``sys.exit()`` inside a function the check calls, an audit hook
raising ``SystemExit``, a closed stdout). A fixed harness (``_code_harness.py``) runs
as two processes: a warden that holds a random per-test nonce and never runs
candidate code, and a runner, started fresh, that runs the candidate, then the
check, in one namespace. Only when the check *returns* (an exception out of it,
``SystemExit(0)`` included, is a failure) does the runner report to the warden over
a pipe and exit 0; the warden then prints the nonce. A test passes only with exit
status 0 *and* the nonce as the last line. The nonce is never in the runner's
process, its files, stdin, argv or environment, and the warden is non-dumpable, so
no frame, ``gc`` walk or ``/proc`` read by the candidate finds it. If the candidate
kills the sandbox's supervisor, the run counts as killed (a failed test), not as a
sandbox fault. What this does not stop: code written against this harness that
writes the runner's one-byte report to the descriptor it inherits, or that changes
what the check's expressions mean (an ``__eq__`` that is always true); the check
runs in the candidate's process, so no harness can tell its return from a forged
one there — the check's author owns those.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from benchmax.envs import RolloutFailure
from benchmax.rewards._text import extract_code_block
from benchmax.sandbox import SandboxError, SandboxResult, run_python_async

logger = logging.getLogger("benchmax.rewards.code")

Compare = Literal["exact", "lines", "tokens"]

_CANDIDATE = "__benchmax_candidate__.py"
_SEALED = "__benchmax_check__.json"
_HARNESS = (Path(__file__).parent / "_code_harness.py").read_text(encoding="utf-8")
"""The program a test with a ``check`` runs (``_code_harness.py``); it reads the two files above."""


@dataclass(frozen=True, slots=True)
class CodeTest:
    """One test: feed ``stdin`` and compare stdout with ``expected_stdout``, and/or
    append ``check`` (assertions) to the program; exit status 0 is required either way.
    """

    stdin: str = ""
    expected_stdout: str | None = None
    check: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.expected_stdout is None and self.check is None:
            label = f" {self.name!r}" if self.name else ""
            raise ValueError(f"CodeTest{label} needs expected_stdout or check (or both)")


@dataclass(frozen=True, slots=True)
class CodeTestResult:
    """How one test went. ``reason``: passed, wrong_output, error, timeout, memory, output_limit, or
    no_report (the program exited 0 but the check never reported: it ended the process early)."""

    test: CodeTest
    passed: bool
    reason: str
    run: SandboxResult


def outputs_match(actual: str, expected: str, compare: Compare = "lines") -> bool:
    """``exact``; ``lines``: trailing spaces and trailing blank lines ignored; ``tokens``:
    whitespace-separated tokens equal."""
    if compare == "exact":
        return actual == expected
    if compare == "tokens":
        return actual.split() == expected.split()
    if compare == "lines":
        return [line.rstrip() for line in actual.rstrip().splitlines()] == [
            line.rstrip() for line in expected.rstrip().splitlines()
        ]
    raise ValueError(f"unknown compare mode {compare!r}; use 'exact', 'lines' or 'tokens'")


async def run_code_tests(
    code: str,
    tests: Sequence[CodeTest],
    *,
    timeout: float = 5.0,
    memory_mb: int = 256,
    files: Mapping[str, str | bytes] | None = None,
    compare: Compare = "lines",
    python: str | None = None,
) -> list[CodeTestResult]:
    """Run ``code`` once per test, concurrently; results in the tests' order.

    ``python`` picks the interpreter (a venv with the libraries the task
    allows); by default the one running benchmax.
    """

    taken = sorted({_CANDIDATE, _SEALED} & set(files or {}))
    if taken:
        raise ValueError(f"files may not be named {', '.join(taken)}: the code-test harness uses those names")

    async def one(test: CodeTest) -> CodeTestResult:
        program, extra, nonce = code, dict(files or {}), None
        if test.check is not None:
            nonce = secrets.token_hex(16)
            program = _HARNESS
            extra[_CANDIDATE] = code
            extra[_SEALED] = json.dumps({"check": test.check, "nonce": nonce})
        try:
            run = await run_python_async(
                program, stdin=test.stdin, timeout=timeout, memory_mb=memory_mb, files=extra, python=python
            )
        except SandboxError as exc:
            raise RolloutFailure("sandbox_error", str(exc)) from exc
        reported = True
        if nonce is not None:
            reported = run.stdout.endswith(f"\n{nonce}\n")
            if reported:
                run = replace(run, stdout=run.stdout[: -len(nonce) - 2])
        return CodeTestResult(test, *_judge_run(run, test, compare, reported=reported), run=run)

    return list(await asyncio.gather(*(one(test) for test in tests)))


def _judge_run(run: SandboxResult, test: CodeTest, compare: Compare, *, reported: bool) -> tuple[bool, str]:
    if run.timed_out:
        return False, "timeout"
    if run.output_truncated:
        return False, "output_limit"
    if run.exit_code != 0:
        return False, "memory" if run.memory_error else "error"
    if not reported:
        return False, "no_report"
    if test.expected_stdout is not None and not outputs_match(run.stdout, test.expected_stdout, compare):
        return False, "wrong_output"
    return True, "passed"


async def code_pass_rate(code: str | None, tests: Sequence[CodeTest], **options: object) -> float:
    """The fraction of ``tests`` the program passes; 0.0 for no program or no tests.

    ``options`` go to :func:`run_code_tests` (timeout, memory_mb, files, compare).
    """
    if not code or not code.strip() or not tests:
        return 0.0
    results = await run_code_tests(code, tests, **options)  # type: ignore[arg-type]
    passed = sum(result.passed for result in results)
    failures = [
        f"{result.test.name or index}: {result.reason}" for index, result in enumerate(results) if not result.passed
    ]
    detail = f" (failed {', '.join(failures[:10])})" if failures else ""
    logger.info("code passed %d/%d tests%s", passed, len(results), detail)
    return passed / len(results)


async def code_rewards(
    completion: str,
    tests: Sequence[CodeTest],
    *,
    language: str | None = "python",
    prefix: str = "tests",
    **options: object,
) -> dict[str, float]:
    """A reward dict from a completion: the last fenced code block is the program.

    Components: ``{prefix}_passed`` (fraction) and ``{prefix}_all`` (1.0 only
    when every test passes). A completion without a code block scores zeros.
    """
    code = extract_code_block(completion, language)
    rate = await code_pass_rate(code, tests, **options)
    return {f"{prefix}_passed": rate, f"{prefix}_all": float(rate == 1.0)}
