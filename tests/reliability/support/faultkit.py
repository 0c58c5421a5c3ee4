"""A fault drill: many rollouts through the runner against a scripted server that misbehaves.

:class:`FaultPolicy` decides each request's fate from a seeded hash of (pass,
prompt, attempt number), so the faults are random in mix yet identical from run
to run and independent of scheduling order. :func:`drill` runs one pass through
``arun`` (engine, client, store: all real) and reads the figures back from the
store and the server. Used by ``tests/reliability/test_fault_injection.py`` and
``bench/faults.py``.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import hashlib
import os
import resource
import threading
import time
from collections import Counter
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchmax import open_run
from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, ListDataset
from benchmax.runner import RunConfig, arun

# Per-request fault mix (fractions of all requests, retries included).
MIX: tuple[tuple[str, float], ...] = (
    ("http_503", 0.10),
    ("http_429", 0.05),
    ("reset", 0.02),
    ("hang", 0.01),
    ("malformed", 0.01),
    ("truncated", 0.01),
)
RETRY_AFTER = 1
"""Seconds the 429s ask for (an integer, as real servers send)."""


def fault_step(kind: str, hang: float) -> dict[str, Any]:
    """The scripted-server ``fail`` step for one fault kind (fires on every request it is given)."""
    always = 1_000_000_000
    return {
        "http_503": {"status": 503, "times": always},
        "http_429": {"status": 429, "times": always, "retry_after": RETRY_AFTER},
        "reset": {"reset": True, "times": always},
        "hang": {"hang": hang, "times": always},
        "malformed": {"malformed": True, "times": always},
        "truncated": {"truncated": True, "times": always},
    }[kind]


@dataclass
class FaultPolicy:
    """The server's policy: a seeded fault mix, and a log of what each prompt went through."""

    seed: int = 7
    hang: float = 6.0
    label: str = "pass-1"
    attempts: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    faulted: dict[str, list[str]] = field(default_factory=dict)
    retry_gaps: list[float] = field(default_factory=list)
    _last_429: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, label: str) -> None:
        self.label = label
        self.attempts.clear()
        self.injected.clear()
        self.faulted.clear()
        self.retry_gaps.clear()
        self._last_429.clear()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = str(body["messages"][0]["content"])
        now = time.monotonic()
        with self._lock:
            self.attempts[prompt] += 1
            attempt = self.attempts[prompt]
            asked = self._last_429.pop(prompt, None)
            if asked is not None:
                self.retry_gaps.append(now - asked)
        digest = hashlib.blake2b(f"{self.seed}:{self.label}:{prompt}:{attempt}".encode(), digest_size=8).digest()
        draw = int.from_bytes(digest, "big") / 2**64
        answer = {"content": f"answer to {prompt}"}
        for kind, share in MIX:
            if draw < share:
                with self._lock:
                    self.injected[kind] += 1
                    self.faulted.setdefault(prompt, []).append(kind)
                    if kind == "http_429":
                        self._last_429[prompt] = now
                return {**answer, "fail": fault_step(kind, self.hang)}
            draw -= share
        return answer


class DrillEnv(BaseEnv):
    """Single-turn rollouts; counts context enters and exits so leaks show."""

    max_turns = 1

    def __init__(self, rollouts: int) -> None:
        super().__init__()
        self.rollouts = rollouts
        self.entered = 0
        self.exited = 0

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset(
            [{"prompt_messages": [{"role": "user", "content": f"q{index}"}]} for index in range(self.rollouts)]
        )

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self.entered += 1
        try:
            yield
        finally:
            self.exited += 1

    async def compute_reward(self, rollout):
        reply = rollout.messages[-1].get("content")
        return {"answered": float(reply == f"answer to {rollout.messages[0]['content']}")}


@dataclass(frozen=True)
class DrillFigures:
    rollouts: int
    stored: int
    distinct_ids: int
    reasons: dict[str, int]
    injected: dict[str, int]
    faulted_rollouts: int
    recovered_rollouts: int
    client_retries: dict[str, int]
    client_failures: dict[str, int]
    client_resent: int
    """Requests sent again after their endpoint's gate reopened (endpoint failures spend no retry)."""
    requests: int
    seconds: float
    min_retry_after_gap: float | None
    tasks_left: int
    contexts: tuple[int, int]
    fds: tuple[int, int]
    rss_mb: float
    status: str

    @property
    def recovery(self) -> float:
        return self.recovered_rollouts / self.faulted_rollouts if self.faulted_rollouts else 1.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    """Current resident set size (not the peak), from /proc, once freed memory is given back.

    The C allocator keeps freed blocks for reuse; in a test process already holding a
    gigabyte, how much of a finished run's freed memory it keeps varies by tens of MB
    between identical passes. Collecting and trimming first makes RSS measure what is
    still alive (glibc only; elsewhere the figure includes what the allocator kept)."""
    gc.collect()
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def settle_fds(baseline: int, *, wait: float = 3.0) -> int:
    """Open fds once the server thread has closed its side of our connections."""
    deadline = time.monotonic() + wait
    count = open_fds()
    while count > baseline and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        count = open_fds()
    return count


def drill_config(
    base_url: str, run_dir: Path, *, in_flight: int, request_timeout: float, endpoint_limit: int
) -> RunConfig:
    return RunConfig(
        env="faultkit:DrillEnv",
        base_url=base_url,
        model="scripted",
        concurrency=in_flight,
        run_dir=run_dir,
        engine=EngineConfig(
            request_timeout=request_timeout,
            max_requests=endpoint_limit,
            retry=RetryPolicy(backoff_initial=0.01, backoff_max=0.2, retry_after_max=RETRY_AFTER),
        ),
    )


async def drill(
    base_url: str,
    policy: FaultPolicy,
    run_dir: Path,
    *,
    rollouts: int,
    in_flight: int,
    request_timeout: float,
    endpoint_limit: int = 200,
) -> DrillFigures:
    """One pass: ``rollouts`` single-turn rollouts at ``in_flight`` concurrency, through the runner.

    ``endpoint_limit`` caps requests on the wire (the engine's per-endpoint
    semaphore); rollouts past it queue for a slot, which the request timeout
    does not count, as in a real deployment against one server.
    """
    env = DrillEnv(rollouts)
    fds_before = open_fds()
    started = time.perf_counter()
    result = await arun(
        drill_config(
            base_url, run_dir, in_flight=in_flight, request_timeout=request_timeout, endpoint_limit=endpoint_limit
        ),
        env=env,
    )
    seconds = time.perf_counter() - started
    tasks_left = len(asyncio.all_tasks() - {asyncio.current_task()})
    fds_after = await settle_fds(fds_before)
    with open_run(run_dir) as run:
        rows = run.sql(
            "SELECT r.rollout_id, r.termination_reason, bmx_json(t.messages) FROM rollouts AS r"
            " JOIN transcripts AS t ON t.seq = r.seq"
        )
        status = run.meta["status"]
    reasons = Counter(reason for _, reason, _ in rows)
    finished_prompts = {
        orjson.loads(messages)[0]["content"] for _, reason, messages in rows if reason == "finished"
    }
    faulted = set(policy.faulted)
    gaps = policy.retry_gaps
    return DrillFigures(
        rollouts=rollouts,
        stored=len(rows),
        distinct_ids=len({rollout_id for rollout_id, _, _ in rows}),
        reasons=dict(reasons),
        injected=dict(policy.injected),
        faulted_rollouts=len(faulted),
        recovered_rollouts=len(faulted & finished_prompts),
        client_retries=dict(result.client_stats.get("retries", {})),
        client_failures=dict(result.client_stats.get("failures", {})),
        client_resent=int(result.client_stats.get("resent", 0)),
        requests=int(result.client_stats.get("requests", 0)),
        seconds=seconds,
        min_retry_after_gap=min(gaps) if gaps else None,
        tasks_left=tasks_left,
        contexts=(env.entered, env.exited),
        fds=(fds_before, fds_after),
        rss_mb=rss_mb(),
        status=status,
    )
