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
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from benchmax.local.weights import (
    EMBEDDED_MODEL_NAME,
    INSTALL_HINT,
    EmbeddedModelError,
    find_embedded_model,
)

LOG_NAME = "embedded-model.log"
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
_POLL_INTERVAL = 0.1
_PROBE_TIMEOUT = 1.0
_TAIL_BYTES = 4000


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


class EmbeddedModel:
    """A running SmolLM2 server on 127.0.0.1, as a sync or async context manager.

    ``log_dir`` receives ``embedded-model.log`` (the server's output, appended);
    nothing is printed to the terminal. ``base_url`` (ending in ``/v1``) and
    ``model`` are what an OpenAI-compatible client needs. A request without
    ``max_tokens`` gets ``default_max_tokens``: a 135M model can ramble until
    the context window is full, minutes per turn on a small CPU. The server
    keeps up to ``prompt_cache_bytes`` of evaluated prompt states (0 turns it
    off): concurrent rollouts interleave on the one model, and without it every
    turn re-reads its whole prompt.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        default_max_tokens: int = 512,
        prompt_cache_bytes: int = 256 << 20,
        startup_timeout: float = 120.0,
        stop_timeout: float = 5.0,
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
        self.port: int | None = None
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

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
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # Sync lifecycle.

    def start(self) -> EmbeddedModel:
        """Start the server and block until it answers ``GET /v1/models``."""
        began = time.monotonic()
        self._check_stopped()
        try:
            self._spawn()
            deadline = began + self.startup_timeout
            while not self._probe():
                self._check_alive()
                if time.monotonic() >= deadline:
                    raise self._startup_error(f"did not answer within {self.startup_timeout:g}s")
                time.sleep(_POLL_INTERVAL)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``stop_timeout``. Idempotent."""
        process, self._process = self._process, None
        self.port = None
        if process is None:
            return
        try:
            if process.poll() is None:
                _signal(process, signal.SIGTERM)
                try:
                    process.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    _signal(process, signal.SIGKILL)
        finally:
            if process.poll() is None:
                _signal(process, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> EmbeddedModel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # Async lifecycle: the same steps without blocking the event loop.

    async def astart(self) -> EmbeddedModel:
        began = time.monotonic()
        self._check_stopped()
        try:
            self._spawn()
            deadline = began + self.startup_timeout
            while not await asyncio.to_thread(self._probe):
                self._check_alive()
                if time.monotonic() >= deadline:
                    raise self._startup_error(f"did not answer within {self.startup_timeout:g}s")
                await asyncio.sleep(_POLL_INTERVAL)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    async def astop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            try:
                _signal(process, signal.SIGTERM)
                deadline = time.monotonic() + self.stop_timeout
                while process.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(_POLL_INTERVAL)
            except BaseException:
                self.stop()
                raise
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

    def _check_stopped(self) -> None:
        if self._process is not None:
            raise EmbeddedModelError("the embedded model is already started")

    def _spawn(self) -> None:
        if os.name != "posix":
            raise EmbeddedModelError(
                "the embedded model runs on Linux and macOS; elsewhere pass --base-url"
            )
        check_installed()
        model_path = self.model_path or find_embedded_model()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        listener = socket.create_server(("127.0.0.1", 0))
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
            with open(self.log_path, "ab") as log:
                self._log_offset = log.tell()
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(listener.fileno(),),
                    start_new_session=True,
                )
            self.port = port
        finally:
            listener.close()

    def _probe(self) -> bool:
        port = self.port
        if port is None:
            return False
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=_PROBE_TIMEOUT)
        try:
            connection.request("GET", "/v1/models")
            return connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()

    def _check_alive(self) -> None:
        process = self._process
        if process is not None and process.poll() is not None:
            raise self._startup_error(f"exited with code {process.returncode} while starting")

    def _startup_error(self, what: str) -> EmbeddedModelError:
        return EmbeddedModelError(
            f"the embedded model server ({self.model}) {what}. "
            f"Its log is {self.log_path}; last lines:\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(self._log_offset, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
                text = log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(log unreadable: {exc})"
        lines = text.splitlines()[-20:]
        return "\n".join(f"  {line}" for line in lines) if lines else "  (empty)"


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    # The server leads its own session: signal the whole group, so nothing it
    # may have started outlives it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
