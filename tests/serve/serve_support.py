"""Helpers of the serve tests: ``benchmax serve`` as a real process on a loopback port, and data for its env.

The served env is ``support/served_env.py`` (tools, a ``ToolError``, crashes,
group rewards, context enters and exits written to a trace file). Each
example's prompt carries the scripted model server's answers (``#script:``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmax.remote import wire
from benchmax.testing import free_port

SUPPORT = Path(__file__).parent / "support"
ENV_SPEC = f"{SUPPORT / 'served_env.py'}:ServedEnv"
sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))


def scripted(text: str, steps: Sequence[dict[str, Any]], answer: str, **fields: Any) -> dict[str, Any]:
    """One dataset row whose model turns play ``steps``."""
    content = f"{text}\n#script: {json.dumps(list(steps))}"
    return {"prompt_messages": [{"role": "user", "content": content}], "answer": answer, **fields}


def mixed_rows() -> list[dict[str, Any]]:
    """Rows that end every way a served env's code can make them end."""
    return [
        scripted("add", [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"content": "3"}], "3"),
        scripted("lookup", [{"tool_calls": [{"name": "lookup", "arguments": {"key": "e"}}]}, {"content": "e"}], "e"),
        scripted("explode", [{"tool_calls": [{"name": "explode", "arguments": {}}]}, {"content": "x"}], "x"),
        scripted("crash", [{"content": "y"}], "y", crash_reward=True),
        scripted("plain", [{"content": "wrong"}], "right"),
        scripted("loop", [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}] * 4, "2"),
    ]


def write_rows(directory: Path, rows: Sequence[dict[str, Any]], split: str = "eval") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return directory


def events(trace: Path) -> Counter[str]:
    """How many context enters and exits (and ``aclose`` calls) the served env recorded."""
    path = trace / "events.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split(" ", 1)[0] for line in lines)


def wait_until(what: str, check: Any, timeout: float = 60.0, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended before {what}:\n{proc.communicate()[0]}")
        assert time.monotonic() < deadline, f"no {what} after {timeout:g}s"
        time.sleep(0.05)


class ServeProcess:
    """``benchmax serve ENV`` on one loopback port, killed and restarted at will (the port stays).

    Its output goes to a file (``banner`` reads it while it runs). ``token`` is the
    token the server generated (read from its private token file, as a local
    ``benchmax eval`` reads it), or the one given with ``--token``; ``http`` is an
    httpx client that sends it, as any client allowed to run env code does.
    """

    def __init__(self, data: Path, trace: Path, *, args: Sequence[str] = (), env: dict[str, str] | None = None) -> None:
        self.data = data
        self.trace = trace
        self.args = list(args)
        self.env = env
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None
        self.output = ""
        self.token: str | None = None
        self._log = trace.with_name(f"{trace.name}-serve.log")
        self._http: httpx.Client | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def banner(self) -> str:
        return self._log.read_text() if self._log.exists() else ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(headers=self.headers, timeout=60)
        return self._http

    def start(self) -> ServeProcess:
        command = [
            sys.executable, "-m", "benchmax.cli", "serve", ENV_SPEC, "--port", str(self.port),
            "--data-dir", str(self.data), "--env-arg", f"trace_dir={self.trace}", *self.args,
        ]  # fmt: skip
        self._log.parent.mkdir(parents=True, exist_ok=True)
        with self._log.open("a") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env or dict(os.environ)
            )
        wait_until("the env server answering", self._answers, proc=self.process)
        if "--token" in self.args:
            self.token = self.args[self.args.index("--token") + 1]
        elif "--no-token" not in self.args:
            self.token = wire.token_path(self.port).read_text().strip()
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except urllib.error.HTTPError:
            return True  # it answers (a token is required)
        except OSError:
            return False

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60) -> int:
        process, self.process = self.process, None
        if self._http is not None:
            self._http.close()
            self._http = None
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(signum)
        process.wait(timeout=timeout)
        self.output = self.banner
        if signum == signal.SIGKILL:  # a killed server leaves its token file; a restart replaces it
            wire.token_path(self.port).unlink(missing_ok=True)
        return process.returncode
