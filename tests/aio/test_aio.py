"""The one sync-to-async bridge: from plain sync code, from sync code inside a running loop, and
across calls on one long-lived loop."""

from __future__ import annotations

import asyncio
import threading
from contextvars import ContextVar

import pytest

from benchmax.aio import LoopThread, block_on

_SEEN: ContextVar[str] = ContextVar("seen", default="unset")


async def _answer(value: int) -> tuple[int, str, int]:
    await asyncio.sleep(0)
    return value * 2, _SEEN.get(), threading.get_ident()


def test_block_on_from_plain_sync_code_runs_here():
    assert block_on(_answer(21))[0] == 42


async def test_block_on_inside_a_running_loop_runs_on_a_helper_thread_with_the_callers_context():
    token = _SEEN.set("caller")
    try:
        doubled, seen, thread = block_on(_answer(4))
    finally:
        _SEEN.reset(token)
    assert (doubled, seen) == (8, "caller")
    assert thread != threading.get_ident()


class _Stop(BaseException):
    pass


async def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize("inside_loop", [False, True])
@pytest.mark.parametrize("exc", [ValueError("bad"), _Stop()])
def test_block_on_raises_what_the_coroutine_raised(inside_loop, exc):
    if inside_loop:

        async def outer() -> None:
            block_on(_raise(exc))

        with pytest.raises(type(exc)):
            asyncio.run(outer())
    else:
        with pytest.raises(type(exc)):
            block_on(_raise(exc))


def test_loop_thread_keeps_one_loop_across_calls_and_closes_once():
    runner = LoopThread(name="test-loop")

    async def loop_id() -> int:
        return id(asyncio.get_running_loop())

    try:
        first, second = runner.run(loop_id()), runner.run(loop_id())
        assert first == second == id(runner.loop)
        with pytest.raises(ValueError, match="bad"):
            runner.run(_raise(ValueError("bad")))
    finally:
        runner.close()
        runner.close()
    assert runner.loop.is_closed()
