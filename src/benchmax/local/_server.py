"""The embedded default model: SmolLM2-135M-Instruct behind a local OpenAI-compatible server.

A managed subprocess rather than an in-process model, so that the rollout
engine reaches it through exactly the HTTP path it uses for any other model,
and llama.cpp's CPU-bound generation never stalls benchmax's event loop. The
server is llama-cpp-python's own with its ``chatml-function-calling`` chat
format, so OpenAI tool calls work (two of its gaps are patched in the child,
see ``_serve.py``); it serves one request at a time.

    with EmbeddedModel(log_dir=run_dir) as model:
        client = HttpModelClient(model.base_url)
        ...

Before it is handed out, the server must pass a self-test: a multi-token chat
completion with a tool call. A llama.cpp build tuned to another machine's CPU
can load a model and answer a 1-token prompt, then crash on the first batched
prompt (seen: AMX kernels that raise SIGILL or SIGSEGV in a virtual machine
that advertises AMX). When the server dies by a signal during its self-test, it
is started once more with llama.cpp's extra buffer types (the AMX and repacked
kernels) off; if that also fails, the error says what died, how, the last lines
of its log and the command that rebuilds llama-cpp-python portably.

The subprocess is stopped on every way out: normal exit, exceptions, Ctrl-C
(it runs in its own session, so the terminal's SIGINT reaches only benchmax,
which then stops it), and the death of the benchmax process itself (the child
watches its parent and exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from benchmax.bounded import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, read_reply_sync
from benchmax.local._weights import (
    EMBEDDED_MODEL_NAME,
    INSTALL_HINT,
    EmbeddedModelError,
    find_embedded_model,
)

logger = logging.getLogger("benchmax.local")

LOG_NAME = "embedded-model.log"
SYSTEM_INFO_PREFIX = "benchmax: llama.cpp system info: "
"""How the child writes ``llama_print_system_info()`` into its log."""
CRASH_DRILL_ENV = "BENCHMAX_EMBEDDED_CRASH_DRILL"
"""Reliability drills only: make the server die by SIGSEGV on chosen requests."""
CRASH_DRILLS = ("every-chat", "unless-plain", "third-chat")
"""Ways a drill kills the server by SIGSEGV, as a miscompiled llama.cpp does: on every chat
request; on every one unless the extra buffer types are off; on the third one (of the first
server process only: a restarted server is healthy)."""
PORTABLE_REBUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" '
    "pip install --force-reinstall --no-cache-dir --no-deps 'llama-cpp-python>=0.3.36'"
)
"""Rebuilds llama-cpp-python for a fixed, portable CPU baseline (AVX2 on x86-64, armv8-a on arm64)."""

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
_POLL_INTERVAL = 0.1
_PROBE_TIMEOUT = 1.0
_TAIL_BYTES = 4000
_SELF_TEST_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
_SELF_TEST_BODY = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant that uses tools."},
        {"role": "user", "content": "What is 17 plus 25? Call the add tool with the two numbers."},
    ],
    "tools": [_SELF_TEST_TOOL],
    "tool_choice": {"type": "function", "function": {"name": "add"}},
    "temperature": 0.0,
    "max_tokens": 32,
}


def default_threads() -> int:
    """Threads for llama.cpp: every CPU this process may run on, minus one.

    The spare core keeps benchmax's event loop and the env's tools responsive;
    a 135M model gains little from the last core (see docs/embedded-model.md).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


def check_installed() -> None:
    """Raise :class:`EmbeddedModelError` unless the ``local`` extra is installed."""
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise EmbeddedModelError(
            "the embedded model needs llama-cpp-python's server, which is not installed "
            f"(missing: {', '.join(missing)}). Install it with: {INSTALL_HINT} "
            "(or pass --base-url to use another OpenAI-compatible server)"
        )
    find_embedded_model()


def describe_exit(returncode: int) -> str:
    """``killed by SIGSEGV (signal 11)`` or ``exited with code 1``: how a process ended."""
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        else:
            name = f"{name} (signal {number})"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


class _Died(Exception):
    """The server process ended while it was being started or tested."""

    def __init__(self, returncode: int, during: str) -> None:
        super().__init__(f"{describe_exit(returncode)} {during}")
        self.returncode = returncode

    @property
    def by_signal(self) -> bool:
        return self.returncode < 0


class EmbeddedModel:
    """A running SmolLM2 server on 127.0.0.1, as a sync or async context manager.

    ``log_dir`` receives ``embedded-model.log`` (the server's output, appended);
    nothing is printed to the terminal. ``base_url`` (ending in ``/v1``) and
    ``model`` are what an OpenAI-compatible client needs. A request without
    ``max_tokens`` gets ``default_max_tokens``: a 135M model can ramble until
    the context window is full, minutes per turn on a small CPU. The server
    reuses its KV cache for a prompt that extends the last one; a run sends it
    each rollout's turns back to back (``HttpModelClient.keep_turns_together``),
    so a turn evaluates only what the last one added. ``prompt_cache_bytes`` > 0
    also keeps copies of evaluated prompt states (llama-cpp-python's
    ``LlamaRAMCache``), off by default: each copy holds the logits of a whole
    batch (about 100 MB for SmolLM2, beyond the size the cache counts; a run
    grew the server to 3.3 GB) and costs a copy after every completion. ``plain_kernels`` starts it with llama.cpp's
    extra buffer types off from the first try. ``crash_drill`` (default: the
    ``BENCHMAX_EMBEDDED_CRASH_DRILL`` variable) is for reliability drills: the
    server then dies by SIGSEGV on chosen requests, as a miscompiled build does.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        default_max_tokens: int = 512,
        prompt_cache_bytes: int = 0,
        startup_timeout: float = 120.0,
        stop_timeout: float = 5.0,
        plain_kernels: bool = False,
        crash_drill: str | None = None,
    ) -> None:
        self.log_path = Path(log_dir) / LOG_NAME
        self.model_path = Path(model_path) if model_path is not None else None
        self.model = EMBEDDED_MODEL_NAME
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.default_max_tokens = default_max_tokens
        self.prompt_cache_bytes = prompt_cache_bytes
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.plain_kernels = plain_kernels
        self.crash_drill = crash_drill if crash_drill is not None else os.environ.get(CRASH_DRILL_ENV) or None
        if self.crash_drill is not None and self.crash_drill not in CRASH_DRILLS:
            raise EmbeddedModelError(f"unknown crash drill {self.crash_drill!r}; use one of {', '.join(CRASH_DRILLS)}")
        self.port: int | None = None
        self.startup_seconds: float | None = None
        self.system_info: str | None = None
        """What ``llama_print_system_info()`` reported for the build that serves."""
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self._lock = threading.Lock()
        self._stopped = False

    def __repr__(self) -> str:
        state = f"pid={self.pid}, base_url={self.base_url!r}" if self.running else "stopped"
        return f"EmbeddedModel({self.model!r}, {state})"

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise EmbeddedModelError("the embedded model is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    @property
    def running(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    # Lifecycle.

    def start(self) -> EmbeddedModel:
        """Start the server and block until it answers and passes its self-test."""
        if self._process is not None:
            raise EmbeddedModelError("the embedded model is already started")
        self._stopped = False
        try:
            self._boot()
        except BaseException:
            self.stop()
            raise
        return self

    async def astart(self) -> EmbeddedModel:
        """:meth:`start` without blocking the event loop; cancelling it stops the server."""
        if self._process is not None:
            raise EmbeddedModelError("the embedded model is already started")
        self._stopped = False
        return await self._aboot()

    async def arestart(self) -> EmbeddedModel:
        """Start the server again on the same port, after it died: its clients keep their URL."""
        if self.crash_drill == "third-chat":
            self.crash_drill = None  # the drill is one crash mid-run; the restarted server is healthy
        with self._lock:
            process, self._process = self._process, None
            self._stopped = False
        if process is not None:
            _terminate(process, self.stop_timeout)
        return await self._aboot()

    async def _aboot(self) -> EmbeddedModel:
        try:
            await asyncio.to_thread(self._boot)
        except BaseException:
            self.stop()
            raise
        return self

    async def wait_exit(self, poll: float = 0.2) -> tuple[int, int] | None:
        """Wait until the running server process ends: ``(pid, returncode)``, or ``None`` once stopped."""
        while True:
            process = self._process
            if process is None:
                return None
            returncode = process.poll()
            if returncode is not None:
                return process.pid, returncode
            await asyncio.sleep(poll)

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``stop_timeout``. Idempotent."""
        with self._lock:
            self._stopped = True
            process, self._process = self._process, None
        self.port = None
        if process is not None:
            _terminate(process, self.stop_timeout)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> EmbeddedModel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedModel:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    # Internals.

    def _boot(self) -> None:
        """Launch and self-test; after a crash by a signal, once more with plain kernels."""
        began = time.monotonic()
        plans = (True,) if self.plain_kernels else (False, True)
        first_crash: _Died | None = None
        for plain in plans:
            try:
                self._launch(plain, deadline=time.monotonic() + self.startup_timeout)
            except _Died as died:
                if plain or not died.by_signal:
                    raise self._failure(died, first_crash) from None
                first_crash = died
                logger.warning(
                    "the embedded model server %s; its llama.cpp build (%s) crashed in a CPU kernel this "
                    "machine does not run: starting it again with llama.cpp's AMX/repacked kernels off. "
                    "A portable build avoids this: %s",
                    died,
                    self.system_info or "system info unknown",
                    PORTABLE_REBUILD,
                )
                continue
            self.plain_kernels = plain
            self.startup_seconds = time.monotonic() - began
            return

    def _launch(self, plain: bool, *, deadline: float) -> None:
        process = self._spawn(plain)
        try:
            while not self._probe():
                self._check_alive(process, "while loading the model")
                if time.monotonic() >= deadline:
                    raise EmbeddedModelError(self._describe(f"did not answer within {self.startup_timeout:g}s"))
                time.sleep(_POLL_INTERVAL)
            self.system_info = self._read_system_info()
            self._self_test(process, deadline)
        except BaseException:
            with self._lock:
                if self._process is process:
                    self._process = None
            _terminate(process, self.stop_timeout)
            raise

    def _spawn(self, plain: bool) -> subprocess.Popen[bytes]:
        if os.name != "posix":
            raise EmbeddedModelError("the embedded model runs on Linux and macOS; elsewhere pass --base-url")
        check_installed()
        model_path = self.model_path or find_embedded_model()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        listener = socket.create_server(("127.0.0.1", self.port or 0))
        try:
            port = listener.getsockname()[1]
            command = [
                sys.executable,
                "-m",
                "benchmax.local._serve",
                "--model", str(model_path),
                "--alias", self.model,
                "--n-ctx", str(self.n_ctx),
                "--n-threads", str(self.n_threads),
                "--default-max-tokens", str(self.default_max_tokens),
                "--prompt-cache", str(self.prompt_cache_bytes),
                "--fd", str(listener.fileno()),
                "--parent-pid", str(os.getpid()),
            ]  # fmt: skip
            if plain:
                command.append("--no-extra-buffers")
            if self.crash_drill:
                command += ["--crash", self.crash_drill]
            with self._lock:
                if self._stopped:
                    raise EmbeddedModelError("the embedded model was stopped while it was starting")
                with open(self.log_path, "ab") as log:
                    self._log_offset = log.tell()
                    process = subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        pass_fds=(listener.fileno(),),
                        start_new_session=True,
                    )
                self._process = process
            self.port = port
        finally:
            listener.close()
        return process

    def _probe(self) -> bool:
        port = self.port
        if port is None:
            return False
        from benchmax.client import lists_models  # here: benchmax.local imports without the client's deps

        return lists_models("127.0.0.1", port, timeout=_PROBE_TIMEOUT)

    def _self_test(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        """One multi-token chat completion with a forced tool call must come back well formed.

        A prompt of many tokens takes llama.cpp's batched path, where a build's
        AMX or repacked kernels run; a 1-token probe would pass on a build that
        crashes on every real request.
        """
        body = json.dumps({"model": self.model, **_SELF_TEST_BODY}).encode()
        timeout = max(1.0, deadline - time.monotonic())
        connection = http.client.HTTPConnection("127.0.0.1", self.port or 0, timeout=timeout)
        try:
            connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            status = response.status
            raw = read_reply_sync(
                response,
                limit=DEFAULT_MAX_REPLY_BYTES,
                what="of its self-test",
                encoding=response.getheader("Content-Encoding"),
            )
        except (OSError, http.client.HTTPException, ReplyTooLarge) as exc:
            self._check_alive(process, "during its self-test (a chat completion with a tool call)", wait=2.0)
            problem = f"failed its self-test request ({type(exc).__name__}: {exc})"
            raise EmbeddedModelError(self._describe(problem)) from None
        finally:
            connection.close()
        problem = _self_test_problem(status, raw)
        if problem is not None:
            raise EmbeddedModelError(
                self._describe(f"answered its self-test (a chat completion with a tool call) with {problem}")
            )

    def _check_alive(self, process: subprocess.Popen[bytes], during: str, *, wait: float = 0.0) -> None:
        try:
            returncode = process.wait(wait) if wait else process.poll()
        except subprocess.TimeoutExpired:
            return
        if returncode is not None:
            raise _Died(returncode, during)

    def _failure(self, died: _Died, first: _Died | None) -> EmbeddedModelError:
        what = str(died)
        if first is not None:
            what = f"{died}, with llama.cpp's default kernels and again with its AMX/repacked kernels off"
        fix = ""
        if died.by_signal:
            fix = (
                "\nThe llama-cpp-python build crashes on this CPU. Rebuild it for a portable CPU baseline:\n"
                f"  {PORTABLE_REBUILD}\n(or pass --base-url to use another OpenAI-compatible server)"
            )
        return EmbeddedModelError(self._describe(what) + fix)

    def _describe(self, what: str) -> str:
        build = f"\nllama.cpp build: {self.system_info}" if self.system_info else ""
        return (
            f"the embedded model server ({self.model}) {what}.{build}\n"
            f"Its log is {self.log_path}; last lines:\n{self.log_tail()}"
        )

    def _read_system_info(self) -> str | None:
        for line in reversed(self._log_text().splitlines()):
            if line.startswith(SYSTEM_INFO_PREFIX):
                return line[len(SYSTEM_INFO_PREFIX) :].strip()
        return None

    def _log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the current server process wrote to its log, indented."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(self._log_offset, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
                text = log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"  (log unreadable: {exc})"
        tail = text.splitlines()[-lines:]
        return "\n".join(f"  {line}" for line in tail) if tail else "  (empty)"


def _self_test_problem(status: int, raw: bytes) -> str | None:
    """Why a self-test reply is unusable, or ``None`` when it is a well-formed ``add`` call."""
    preview = raw[:300].decode("utf-8", "replace")
    if status != 200:
        return f"HTTP {status}: {preview}"
    try:
        data: Any = json.loads(raw)
        message = data["choices"][0]["message"]
        call = message["tool_calls"][0]["function"]
        arguments = json.loads(call["arguments"])
    except (ValueError, KeyError, IndexError, TypeError):
        return f"a reply without a well-formed tool call: {preview}"
    if call.get("name") != "add" or not isinstance(arguments, dict):
        return f"a tool call that is not add(a, b): {preview}"
    return None


def _terminate(process: subprocess.Popen[bytes], stop_timeout: float) -> None:
    try:
        if process.poll() is None:
            _signal(process, signal.SIGTERM)
            try:
                process.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGKILL)
    finally:
        if process.poll() is None:
            _signal(process, signal.SIGKILL)
        process.wait()


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    # The server leads its own session: signal the whole group, so nothing it
    # may have started outlives it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
