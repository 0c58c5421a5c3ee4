"""Nothing is lost when the model server misbehaves: a seeded fault drill through the real runner.

10,000 rollouts at 1,000 in flight (200 requests on the wire, the engine's
per-endpoint limit); each request independently meets one of the issue's faults
(10% 503, 5% 429 with ``Retry-After: 1``, 2% resets, 1% hangs past the 3 s
request timeout, 1% malformed JSON, 1% truncated bodies). The drill runs twice so
memory can be compared across identical passes; ~40 s for both on a busy 2-core
machine. ``BENCHMAX_FAULT_DRILL_ROLLOUTS=2000`` runs it smaller; ``bench/faults.py``
prints the same figures as JSON.
"""

from __future__ import annotations

import logging
import os

import pytest
from faultkit import RETRY_AFTER, FaultPolicy, drill

from benchmax.testing import ScriptedServer

ROLLOUTS = int(os.environ.get("BENCHMAX_FAULT_DRILL_ROLLOUTS", "10000"))
IN_FLIGHT = 1000
REQUEST_TIMEOUT = 3.0


@pytest.fixture
def pytest_keeps_no_warnings():
    """pytest holds every captured log record in memory; the drill's ~5,000 retry warnings
    would read as growth between passes, so its capture handlers skip them here."""
    handlers = [handler for handler in logging.getLogger().handlers if type(handler).__module__ == "_pytest.logging"]
    levels = [handler.level for handler in handlers]
    for handler in handlers:
        handler.setLevel(logging.ERROR)
    yield
    for handler, level in zip(handlers, levels, strict=True):
        handler.setLevel(level)


@pytest.fixture
def faulty_server():
    policy = FaultPolicy(seed=7, hang=REQUEST_TIMEOUT * 2)
    with ScriptedServer(policy=policy, keep_requests=0) as server:
        yield server, policy


async def test_under_injected_faults_every_rollout_is_stored_once_and_nothing_leaks(
    faulty_server, tmp_path, pytest_keeps_no_warnings
):
    server, policy = faulty_server
    passes = []
    for number in (1, 2):
        policy.reset(f"pass-{number}")
        passes.append(
            await drill(
                server.base_url,
                policy,
                tmp_path / f"run{number}",
                rollouts=ROLLOUTS,
                in_flight=IN_FLIGHT,
                request_timeout=REQUEST_TIMEOUT,
            )
        )

    for figures in passes:
        assert figures.status == "completed"
        assert figures.stored == figures.distinct_ids == ROLLOUTS, "every rollout stored exactly once"
        assert sum(figures.reasons.values()) == ROLLOUTS and "" not in figures.reasons
        assert set(figures.reasons) <= {"finished", "model_error", "timeout"}, figures.reasons
        assert set(figures.injected) == {"http_503", "http_429", "reset", "hang", "malformed", "truncated"}
        assert figures.recovery >= 0.99, f"{figures.recovered_rollouts}/{figures.faulted_rollouts} recovered"
        # Every injected fault was seen and retried, resent after its endpoint's gate reopened, or was
        # the last straw of a failed rollout.
        seen = sum(figures.client_retries.values()) + sum(figures.client_failures.values()) + figures.client_resent
        assert seen >= sum(figures.injected.values())
        assert figures.client_retries["http_429"] >= figures.injected["http_429"] - figures.client_failures.get(
            "http_429", 0
        )
        assert figures.min_retry_after_gap is not None and figures.min_retry_after_gap >= RETRY_AFTER * 0.95
        assert figures.tasks_left == 0, "no asyncio task outlives the run"
        assert figures.contexts == (ROLLOUTS, ROLLOUTS), "every rollout context entered was exited"
        fds_before, fds_after = figures.fds
        assert fds_after <= fds_before, "no file descriptor outlives the run"
    first, second = passes
    assert second.rss_mb - first.rss_mb < 20, f"RSS grew {second.rss_mb - first.rss_mb:.1f} MB on an identical pass"
