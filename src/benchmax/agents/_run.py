"""Running one agent program for one rollout: an async function, or a command in a subprocess.

Whatever the program does, what comes back is an :class:`AgentRun`: its final
answer (bounded), how it ended (``ok``, ``error`` with the why, ``timeout``) and
the tail of what it wrote to stderr. Nothing raises out of here for the agent's
own failures: the calls it made before failing are the rollout's, and the env
must still build the rollout from them.

A command is another program of the same user, so whatever the driver holds is
within its reach unless the driver closes it: before the first command starts, the
driver makes itself non-dumpable (``PR_SET_DUMPABLE 0``), so ``/proc/<driver>/environ``,
``mem`` and ``fd`` (the run's API key, in the environment the driver was started
with) no longer open to other processes of the user, nor can they trace it; run as
root, a command also starts with an empty capability bounding set (no
``CAP_SYS_PTRACE``, which would reopen them). Whatever a command returns (its answer,
its stderr, its error) has the run's key masked before anything stores or logs it.

A command runs in a session of its own, so on a timeout (or a cancelled rollout)
its whole process group is killed, children included. Its stdout and stderr are
read as bytes and decoded with replacement: an agent that prints non-UTF-8 costs a
``\\ufffd``, not the rollout. Each stderr line is logged as it arrives (logger
``benchmax.agents.stderr``), so the engine's log capture files it under the
rollout beside its turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmax.auth import mask_secrets
from benchmax.envs import truncate_text

logger = logging.getLogger("benchmax.agents")
stderr_logger = logging.getLogger("benchmax.agents.stderr")

AgentFunction = Callable[[Mapping[str, Any], str, str], Awaitable[Any]]
"""``async def agent(example, base_url, api_key) -> answer``: ``example`` is the example's payload."""

MAX_LINE_CHARS = 4_000
"""The longest stderr line kept as one log record (longer ones are cut, and marked)."""

_ENV_PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")
"""The host variables a command sees besides its own: never the host's credentials."""


_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24


@dataclass(frozen=True, slots=True)
class AgentRun:
    """How one agent program ended."""

    status: Literal["ok", "error", "timeout"]
    answer: str = ""
    error: str | None = None
    stderr_tail: str = ""
    exit_code: int | None = None

    def masked(self, secrets: Sequence[str]) -> AgentRun:
        """The run with every echo of ``secrets`` (the run's model key) masked in what the program returned."""
        if not secrets:
            return self
        return AgentRun(
            self.status,
            answer=mask_secrets(self.answer, secrets),
            error=None if self.error is None else mask_secrets(self.error, secrets),
            stderr_tail=mask_secrets(self.stderr_tail, secrets),
            exit_code=self.exit_code,
        )


class _Driver:
    """What keeps this process's memory and environment from the commands it starts (Linux)."""

    sealed = False

    @classmethod
    def seal(cls) -> None:
        """``PR_SET_DUMPABLE 0``, once: other processes of the user can no longer open this
        process's ``/proc`` files (``environ``, ``mem``, ``fd``) or trace it."""
        if cls.sealed or sys.platform != "linux":
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
        cls.sealed = True

    @staticmethod
    def unprivileged_start() -> Callable[[], None] | None:
        """For root: a hook run in the child before exec that empties its capability bounding set, so
        the command (uid 0 still) holds no ``CAP_SYS_PTRACE`` or ``CAP_DAC_*`` into the driver."""
        if sys.platform != "linux" or os.geteuid() != 0:
            return None
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
        prctl = libc.prctl

        def drop() -> None:  # in the child, between fork and exec: no allocation, no imports
            for capability in range(last + 1):
                if prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")

        return drop


async def run_function(
    agent: AgentFunction, example: Mapping[str, Any], base_url: str, api_key: str, *, timeout: float, max_answer: int
) -> AgentRun:
    """Await ``agent`` under ``timeout``; its exception is the run's error (traceback logged with the rollout)."""
    try:
        async with asyncio.timeout(timeout) as deadline:
            answer = await agent(example, base_url, api_key)
    except TimeoutError as exc:
        if deadline.expired():
            return AgentRun("timeout", error=f"the agent ran past its {timeout:g}s limit")
        return _function_failed(exc)
    except Exception as exc:
        return _function_failed(exc)
    return AgentRun("ok", answer=truncate_text(_answer_text(answer), max_answer))


def _function_failed(exc: BaseException) -> AgentRun:
    logger.error("the agent raised %s", type(exc).__name__, exc_info=exc)
    return AgentRun("error", error=truncate_text(f"the agent raised {type(exc).__name__}: {exc}", 2_000))


def _answer_text(answer: Any) -> str:
    if answer is None:
        return ""
    if isinstance(answer, bytes):
        return answer.decode("utf-8", "replace")
    return answer if isinstance(answer, str) else str(answer)


def command_env(base_url: str, api_key: str, rollout_id: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: a few host variables, the author's own, and the rollout's endpoint."""
    env = {name: os.environ[name] for name in _ENV_PASSED if name in os.environ}
    env.update(extra)
    env["OPENAI_BASE_URL"] = base_url
    env["OPENAI_API_KEY"] = api_key
    env["BENCHMAX_ROLLOUT_ID"] = rollout_id
    return env


async def run_command(
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    *,
    timeout: float,
    max_answer: int,
    max_stderr: int,
    cwd: str | None = None,
    secrets: Sequence[str] = (),
) -> AgentRun:
    """Run ``argv`` with ``stdin``; its stdout is the answer, non-zero exit an error, past ``timeout`` killed.

    ``secrets`` (the run's model key) are masked in every stderr line logged and in what comes back.
    """
    try:
        _Driver.seal()
        unprivileged = _Driver.unprivileged_start()
    except (OSError, ValueError) as exc:
        return AgentRun(
            "error",
            error=f"the agent command was not started: the run's key cannot be kept from it ({exc}); "
            "run it in a sandbox (sandbox=True)",
        )
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=unprivileged,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return AgentRun("error", error=f"cannot start the agent command {argv[0]!r}: {exc}")
    stdout = _Head(max_answer * 4)
    stderr = _Tail(max_stderr)
    readers = [
        asyncio.create_task(_feed(process, stdin)),
        asyncio.create_task(_read(process.stdout, stdout.add)),
        asyncio.create_task(_read_lines(process.stderr, stderr, program_file(argv, cwd), secrets)),
    ]
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except TimeoutError:
            timed_out = True
    finally:
        _kill_group(process)  # what it left running in its session, or all of it
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 5.0)
        await _group_gone(process.pid)
        # every holder of its pipes is dead now: the readers reach the end of what it wrote
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 5.0)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return command_ended(
        stdout.data().decode("utf-8", "replace"),
        stderr.text(),
        process.returncode,
        timed_out=timed_out,
        timeout=timeout,
        max_answer=max_answer,
    ).masked(secrets)


def command_ended(
    stdout: str, tail: str, code: int | None, *, timed_out: bool, timeout: float, max_answer: int, where: str = ""
) -> AgentRun:
    """How a command ended, run here or in a sandbox (``where`` says which): stdout is the answer,
    past ``timeout`` a timeout, a non-zero status an error with the stderr tail."""
    if timed_out:
        return AgentRun(
            "timeout", error=f"the agent command ran past its {timeout:g}s limit and was killed", stderr_tail=tail
        )
    answer = truncate_text(stdout.strip(), max_answer)
    if code != 0:
        ended = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        detail = f": {truncate_text(tail.strip(), 2_000)}" if tail.strip() else " (no stderr)"
        return AgentRun(
            "error", answer=answer, error=f"the agent command {ended}{where}{detail}", stderr_tail=tail, exit_code=code
        )
    return AgentRun("ok", answer=answer, stderr_tail=tail, exit_code=code)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the command's session (it and whatever it spawned), if anything of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _group_gone(pgid: int, limit: float = 5.0) -> None:
    """Wait (bounded) until the kernel has delivered the kill to every process of the group: the
    rollout ends once its processes are gone, not while a child is still on its way out."""
    loop = asyncio.get_running_loop()
    until = loop.time() + limit
    while loop.time() < until and _group_alive(pgid):
        await asyncio.sleep(0.01)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A zombie does not count: a killed child
    reparented to an init that never reaps (some containers' pid 1) stays one for good."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(data)
        await process.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.close()


async def _read(stream: asyncio.StreamReader | None, add: Callable[[bytes], None]) -> None:
    assert stream is not None
    while chunk := await stream.read(65_536):
        add(chunk)


async def _read_lines(
    stream: asyncio.StreamReader | None, tail: _Tail, source: str, secrets: Sequence[str] = ()
) -> None:
    """Each line to the rollout's log as it comes (so its time places it among the turns), and to
    the bounded tail; a flood is dropped, not kept."""
    assert stream is not None
    pending = b""
    while chunk := await stream.read(65_536):
        tail.add(chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            log_line(line, source, secrets)
        if len(pending) > MAX_LINE_CHARS * 4:
            log_line(pending, source, secrets)
            pending = b""
    if pending:
        log_line(pending, source, secrets)


def program_file(argv: Sequence[str], cwd: str | None = None) -> str:
    """What wrote an agent command's stderr, as its log records name it: the program's file
    (``agent.py`` of ``python agent.py``, or the command itself when it is a file), else its name."""
    base = Path(cwd or ".")
    for part in (*argv[1:], *argv[:1]):
        if part and not part.startswith("-") and (base / part).is_file():
            return str((base / part).resolve())
    return argv[0] if argv else "agent"


def log_line(line: bytes, source: str = "agent", secrets: Sequence[str] = ()) -> None:
    """One line of an agent program's stderr as a log record of the rollout, bounded, the run's key
    masked, attributed to the program (``source``: its file), not to the benchmax code that read it."""
    text = line.decode("utf-8", "replace").rstrip("\r")
    if text.strip() and stderr_logger.isEnabledFor(logging.INFO):
        shown = mask_secrets(truncate_text(text, MAX_LINE_CHARS), secrets)
        record = stderr_logger.makeRecord(stderr_logger.name, logging.INFO, source, 0, "%s", (shown,), None)
        stderr_logger.handle(record)


class _Head:
    """The first ``limit`` bytes of a stream; the rest is read and dropped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0

    def add(self, chunk: bytes) -> None:
        room = self._limit - self._size
        if room > 0:
            self._chunks.append(chunk[:room])
            self._size += min(room, len(chunk))

    def data(self) -> bytes:
        return b"".join(self._chunks)


class _Tail:
    """The last ``limit`` characters of a stream, decoded with replacement."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()

    def add(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > 4 * self._limit:
            del self._data[: len(self._data) - 4 * self._limit]

    def text(self) -> str:
        return self._data.decode("utf-8", "replace")[-self._limit :]
