"""Math answer equivalence through math-verify, with a hard time limit.

``1/2``, ``0.5`` and ``\\frac{1}{2}`` are the same answer; so are ``{1, 2}``
and ``\\{2, 1\\}``. math-verify (Hugging Face) parses LaTeX and plain
expressions into sympy and compares them. Two traps make us run it in a worker
process rather than inline:

- its timeouts use ``signal.alarm``, which works only in the main thread; in a
  worker thread ``parse`` raises ``ValueError`` unless timeouts are turned off;
- sympy can spend minutes on a pathological expression (``9**9**9**9``) inside
  code no signal interrupts, and it would hold the GIL while it does.

So each :class:`MathVerifier` keeps a few long-lived worker processes (sympy is
imported once per worker, ~0.5 s), sends one comparison at a time over a pipe,
and kills and replaces a worker that misses the deadline. A timed-out
comparison counts as *not equal* and is logged: it is the answer's fault far
more often than the reference's. Workers get a memory cap and a scrubbed
environment, since sympy's parser evaluates what it parses.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from benchmax.rewards._offload import run_sync
from benchmax.rewards._text import extract_answer

logger = logging.getLogger("benchmax.rewards.math")

_WORKER = str(Path(__file__).with_name("_math_worker.py"))
_STARTUP_TIMEOUT = 120.0


class MathVerifyUnavailable(RuntimeError):
    """math-verify is not installed in the interpreter that runs the workers."""


class _Worker:
    def __init__(self, python: str, memory_mb: int) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.process = subprocess.Popen(
            [python, "-P", _WORKER, str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        ready = self.read(time.monotonic() + _STARTUP_TIMEOUT)
        if not ready or not ready.get("ready"):
            self.kill()
            why = ready.get("error") if ready else "it did not start"
            raise MathVerifyUnavailable(
                f"math-verify worker unavailable ({why}); install it with `pip install 'benchmax[rewards]'`"
            )

    def read(self, deadline: float) -> dict[str, object] | None:
        """One JSON reply line, or ``None`` at the deadline or if the worker died."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def ask(self, request: dict[str, object], deadline: float) -> dict[str, object] | None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        return self.read(deadline)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class MathVerifier:
    """A small pool of math-verify workers; thread-safe, shared across event loops.

    ``timeout`` bounds one comparison in seconds; ``float_rounding`` and
    ``strict`` go to ``math_verify.verify``. ``memory_mb`` caps each worker.
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        timeout: float = 5.0,
        float_rounding: int = 6,
        strict: bool = True,
        memory_mb: int = 2048,
        python: str | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers!r}")
        self.workers = workers
        self.timeout = timeout
        self.float_rounding = float_rounding
        self.strict = strict
        self.memory_mb = memory_mb
        self.python = python or sys.executable
        self.timeouts = 0
        self._idle: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._condition = threading.Condition()

    def equal(self, answer: str, gold: str | Iterable[str], *, timeout: float | None = None) -> bool:
        """Whether ``answer`` matches ``gold`` (any of several). Blocks the calling thread."""
        golds = [gold] if isinstance(gold, str) else [str(item) for item in gold]
        if not golds:
            raise ValueError("at least one gold answer is needed")
        answer = str(answer)
        if any(answer.strip() == item.strip() for item in golds):
            return True
        limit = self.timeout if timeout is None else timeout
        request = {
            "answer": answer,
            "gold": golds,
            "timeout": max(1, math.ceil(limit)),
            "float_rounding": self.float_rounding,
            "strict": self.strict,
        }
        worker = self._acquire()
        reply = worker.ask(request, time.monotonic() + limit + 0.5)
        if reply is None:
            worker.kill()
            self._release(None)
            self.timeouts += 1
            logger.warning(
                "math-verify gave no answer within %.1fs for answer %r; scoring it as not equal",
                limit,
                answer[:200],
            )
            return False
        self._release(worker)
        if "error" in reply:
            logger.warning("math-verify failed on answer %r: %s", answer[:200], reply["error"])
        elif not reply.get("gold_parsed", True):
            logger.warning("math-verify could not parse the gold answer %r", golds)
        return bool(reply.get("equal"))

    async def aequal(self, answer: str, gold: str | Iterable[str], *, timeout: float | None = None) -> bool:
        """:meth:`equal` from async code, without blocking the event loop."""
        return await run_sync(self.equal, answer, gold, timeout=timeout)

    def _acquire(self) -> _Worker:
        with self._condition:
            while True:
                if self._closed:
                    raise RuntimeError("MathVerifier is closed")
                if self._idle:
                    return self._idle.pop()
                if self._started < self.workers:
                    self._started += 1
                    break
                self._condition.wait()
        try:
            return _Worker(self.python, self.memory_mb)
        except BaseException:
            self._release(None)
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._condition:
            if worker is None:
                self._started -= 1
            elif self._closed:
                worker.kill()
            else:
                self._idle.append(worker)
            self._condition.notify()

    def close(self) -> None:
        """Stop the idle workers; busy ones stop when their comparison returns."""
        with self._condition:
            self._closed = True
            idle, self._idle = self._idle, []
            self._condition.notify_all()
        for worker in idle:
            worker.kill()


_default: MathVerifier | None = None
_default_lock = threading.Lock()


def default_verifier() -> MathVerifier:
    """The process-wide verifier :func:`math_equal` uses (workers: up to 2, by CPU count)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = MathVerifier(workers=min(2, os.cpu_count() or 1))
            atexit.register(_default.close)
        return _default


async def math_equal(answer: str, gold: str | Iterable[str], *, timeout: float = 5.0) -> bool:
    """Whether two math answers are equivalent (numbers, fractions, LaTeX, sets, intervals).

    Runs math-verify in a worker process with a hard ``timeout``; a comparison
    that runs past it is ``False``. Passing whole completions works too:
    math-verify finds the last ``\\boxed{}`` or ``$…$`` itself.
    """
    return await default_verifier().aequal(answer, gold, timeout=timeout)


def math_equal_sync(answer: str, gold: str | Iterable[str], *, timeout: float = 5.0) -> bool:
    """:func:`math_equal` for synchronous code; blocks the calling thread."""
    return default_verifier().equal(answer, gold, timeout=timeout)


async def math_reward(completion: str, gold: str | Iterable[str], *, timeout: float = 5.0) -> float:
    """1.0 when the answer in ``completion`` equals ``gold``.

    The answer comes from ``<answer>…</answer>`` or ``\\boxed{}`` when present
    (:func:`~benchmax.rewards.extract_answer`), else the whole text goes to
    math-verify; an empty completion scores 0.0 without a worker call.
    """
    if not completion.strip():
        return 0.0
    answer = extract_answer(completion, order=("tag", "boxed")) or completion
    return float(await math_equal(answer, gold, timeout=timeout))
