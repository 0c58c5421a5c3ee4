"""The scripted server as a real process: for drills that kill a model server and bring it back."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import TracebackType

from benchmax.client import lists_models


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """``python -m benchmax.testing`` on one loopback port, killed and restarted at will.

    The port stays the same across restarts, as a model server that is restarted
    by its supervisor (or rescheduled behind one service address) keeps its URL.
    """

    def __init__(self, port: int | None = None, *, args: tuple[str, ...] = (), startup_timeout: float = 60.0) -> None:
        self.port = port or free_port()
        self.args = args
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> ServerProcess:
        """Start the process and wait until it answers ``GET /v1/models``."""
        if self.running:
            raise RuntimeError("the server process is running already")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "benchmax.testing", "--port", str(self.port), *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + self.startup_timeout
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(f"the server process exited: {self._stderr()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the server process did not answer within {self.startup_timeout:g}s")
            time.sleep(0.05)
        return self

    def kill(self, signum: int = signal.SIGKILL) -> None:
        """End the process at once (by default as an OOM kill would: no goodbye to its clients)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signum)
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()

    def stderr_text(self) -> str:
        return self._stderr()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()

    def _answers(self) -> bool:
        return lists_models("127.0.0.1", self.port, timeout=1.0)

    def _stderr(self) -> str:
        process = self._process
        if process is None or process.stderr is None or process.poll() is None:
            return ""
        return process.stderr.read().decode("utf-8", "replace")[-2000:]
