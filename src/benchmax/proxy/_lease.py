"""One rollout's right to call the model through the proxy, and what it called."""

from __future__ import annotations

import asyncio
import contextvars
import time

from benchmax.envs import SamplingParams, TerminationReason
from benchmax.proxy._records import RecordedCall


class ProxyLease:
    """An agent's credentials for one rollout: ``base_url`` and ``api_key`` for any OpenAI SDK.

    Both are unguessable and both must match: the URL names the lease (a path
    ``/r/<slot>/v1`` of the proxy) and the key proves the caller was given it.
    A call with another lease's key, an unknown key or after the lease ended is
    refused (401) and recorded nowhere. ``calls`` are the lease's recorded calls
    in arrival order (a call still in flight is not among them yet);
    ``stop_reason`` is the termination reason once the proxy refused a call for
    the rollout's budget (``max_turns_exceeded`` for ``max_calls``, ``timeout``
    for the deadline), ``None`` while it never had to.
    """

    def __init__(
        self,
        rollout_id: str,
        *,
        base_url: str,
        api_key: str,
        slot: str,
        max_calls: int | None,
        deadline: float | None,
        sampling: SamplingParams | None,
        context: contextvars.Context,
    ) -> None:
        self.rollout_id = rollout_id
        self.base_url = base_url
        self.api_key = api_key
        self.max_calls = max_calls
        self._deadline = deadline
        self.sampling = sampling
        self.stop_reason: str | None = None
        self._slot = slot
        self._context = context
        self._admitted = 0
        self._records: list[RecordedCall] = []
        self._sorted = True
        self._tasks: set[asyncio.Task[object]] = set()
        self._limits: set[asyncio.Timeout] = set()
        self._closed = False

    def __repr__(self) -> str:
        # the key never shows, as with every credential benchmax holds
        return f"ProxyLease({self.rollout_id!r}, calls={len(self._records)}, stop_reason={self.stop_reason!r})"

    @property
    def deadline(self) -> float | None:
        """``time.monotonic()`` past which the proxy answers no more calls; ``None``: none."""
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        """Move the deadline (a runner that pauses the rollout's clock moves it); calls in flight follow."""
        self._deadline = value
        for limit in self._limits:
            limit.reschedule(_loop_time(value))

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        if not self._sorted:
            self._records.sort(key=lambda call: call.index)
            self._sorted = True
        return tuple(self._records)

    @property
    def in_flight(self) -> int:
        """Calls forwarded and not answered yet."""
        return len(self._tasks)

    def _limit(self) -> asyncio.Timeout:
        """A timeout at the deadline for one call in flight, moved with the deadline until the call ends."""
        return asyncio.timeout_at(_loop_time(self._deadline))

    def _stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def _admit(self) -> tuple[int, str] | tuple[None, str]:
        """The next call's index, or why the rollout's budget refuses it (``None`` and a message)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._stop(TerminationReason.TIMEOUT)
            return None, "rollout_deadline_exceeded"
        if self.max_calls is not None and self._admitted >= self.max_calls:
            self._stop(TerminationReason.MAX_TURNS_EXCEEDED)
            return None, "max_calls_exceeded"
        index = self._admitted
        self._admitted += 1
        return index, ""

    def _record(self, call: RecordedCall) -> None:
        if self._records and self._records[-1].index > call.index:
            self._sorted = False
        self._records.append(call)


def _loop_time(deadline: float | None) -> float | None:
    """A ``time.monotonic()`` instant on the running loop's clock."""
    if deadline is None:
        return None
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())
