"""The request limit: a FIFO bound on requests in flight that shrinks while the event loop never idles."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp import web

from benchmax.client import RequestLimit
from benchmax.engine import EngineConfig


def _burn(seconds: float) -> None:
    """Hold the loop on CPU for ``seconds`` of wall time, however fast the machine is."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class _Slot:
    """``async with _Slot(limit):`` around one request, as the HTTP client holds it."""

    def __init__(self, limit: RequestLimit) -> None:
        self.limit = limit
        self.granted = 0.0

    async def __aenter__(self) -> None:
        self.granted = await self.limit.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.limit.release(self.granted)


async def _until(condition, deadline: float = 30.0) -> None:
    stop = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < stop, "the condition never held"
        await asyncio.sleep(0.01)


async def test_no_more_than_the_ceiling_enter_and_waiters_enter_in_arrival_order():
    limit = RequestLimit(2, adaptive=False)
    entered: list[int] = []
    peak = 0

    async def one(index: int) -> None:
        nonlocal peak
        async with _Slot(limit):
            entered.append(index)
            peak = max(peak, limit.in_use)
            await asyncio.sleep(0.001)

    await asyncio.gather(*(one(index) for index in range(10)))
    assert peak == 2
    assert entered == list(range(10))
    assert limit.in_use == 0


async def test_a_cancelled_waiter_gives_up_its_place_and_the_next_one_enters():
    limit = RequestLimit(1, adaptive=False)
    release = asyncio.Event()
    entered: list[str] = []

    async def holder() -> None:
        async with _Slot(limit):
            await release.wait()

    async def waiter(name: str) -> None:
        async with _Slot(limit):
            entered.append(name)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    cancelled = asyncio.create_task(waiter("cancelled"))
    kept = asyncio.create_task(waiter("kept"))
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    await asyncio.gather(first, kept)
    assert entered == ["kept"]
    assert limit.in_use == 0
    async with _Slot(limit):  # and the limit is not left blocked by the dead waiter
        assert limit.in_use == 1


async def test_a_waiter_cancelled_as_it_is_handed_a_slot_passes_the_slot_on():
    limit = RequestLimit(1, adaptive=False)
    entered: list[str] = []

    async def waiter(name: str) -> None:
        async with _Slot(limit):
            entered.append(name)

    granted = await limit.acquire()
    handed = asyncio.create_task(waiter("handed"))
    kept = asyncio.create_task(waiter("kept"))
    await asyncio.sleep(0)
    limit.release(granted)  # hands the slot to "handed", which has not run yet
    handed.cancel()
    await asyncio.gather(handed, kept, return_exceptions=True)
    assert entered == ["kept"]
    assert limit.in_use == 0


def test_a_saturated_loop_sheds_what_the_rate_does_not_need_at_most_half_at_a_time_down_to_the_floor():
    limit = RequestLimit(256)
    limit.resize(1.0, rate=4000, service=0.001)  # 4,000 requests/s of 1 ms need 4 (8 with headroom)
    assert limit.limit == 128
    for _ in range(10):
        limit.resize(0.95, rate=4000, service=0.001)
    assert limit.limit == 16
    limit.resize(0.7, rate=4000, service=0.001)  # neither saturated nor spare: it holds
    assert limit.limit == 16


def test_a_saturated_loop_keeps_the_requests_a_slow_server_needs():
    limit = RequestLimit(256)
    limit.resize(1.0, rate=4000, service=0.05)  # 50 ms each: 200 in flight keep the rate
    assert limit.limit == 256
    limit.resize(1.0, rate=4000, service=0.02)  # 20 ms: 80 needed, 160 kept
    assert limit.limit == 160
    limit.resize(1.0)  # nothing known of the rate or the server: nothing shed
    assert limit.limit == 160


def test_a_loop_with_time_to_spare_grows_the_limit_by_a_quarter_up_to_its_ceiling():
    limit = RequestLimit(256)
    limit.limit = 16
    limit.resize(0.1)
    assert limit.limit == 20
    for _ in range(30):
        limit.resize(0.0)
    assert limit.limit == 256


def test_the_floor_is_never_above_the_ceiling_and_the_ceiling_must_be_positive():
    limit = RequestLimit(3)
    for _ in range(5):
        limit.resize(1.0, rate=1000, service=0.0)
    assert limit.limit == 3
    with pytest.raises(ValueError, match="ceiling >= 1"):
        RequestLimit(0)


async def test_a_loop_kept_busy_by_every_request_lets_fewer_in_and_a_held_limit_does_not():
    async def saturate(limit: RequestLimit) -> None:
        async def one() -> None:
            async with _Slot(limit):
                _burn(0.0005)  # every request costs the loop CPU: with 64 queued it never idles
                await asyncio.sleep(0)

        async def worker() -> None:
            while limit.limit > limit.floor and not done.is_set():
                await one()

        done = asyncio.Event()
        workers = [asyncio.create_task(worker()) for _ in range(64)]
        try:
            await asyncio.wait_for(_until(lambda: limit.limit == limit.floor), 60)
        finally:
            done.set()
            await asyncio.gather(*workers)

    adaptive = RequestLimit(48)
    started = time.monotonic()
    await saturate(adaptive)
    took = time.monotonic() - started
    assert adaptive.limit == 16

    held = RequestLimit(48, adaptive=False)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(saturate(held), 2 * took)  # twice what the adaptive one needed
    assert held.limit == 48


async def test_a_loop_with_time_to_spare_grows_a_shrunk_limit_back_to_its_ceiling():
    limit = RequestLimit(32)
    limit.limit = 16
    stop = asyncio.Event()

    async def worker() -> None:
        while not stop.is_set():
            async with _Slot(limit):
                await asyncio.sleep(0.02)  # waiting on a slow server: the loop idles

    workers = [asyncio.create_task(worker()) for _ in range(48)]
    try:
        await _until(lambda: limit.limit == 32)
    finally:
        stop.set()
        await asyncio.gather(*workers)


async def test_an_http_client_whose_limit_shrinks_sends_fewer_requests_at_once_and_says_so_once(caplog):
    """The client obeys its limit's decisions (the probe that makes them is tested above, on its own).

    The decisions are given, not measured: whether a loop shared with other processes reads as
    saturated depends on the machine's load, and this test is about what the client does with them.
    """
    caplog.set_level(logging.INFO, logger="benchmax.client")
    in_flight = 0
    peaks: list[int] = []

    async def chat(request: web.Request) -> web.Response:
        nonlocal in_flight
        in_flight += 1
        peaks.append(in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return web.json_response(
            {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    config = EngineConfig(max_requests=64, adapt_requests=False)  # no probe: only the decisions below
    client = config.client_pool().http(f"http://127.0.0.1:{port}/v1")
    stop = asyncio.Event()

    async def worker() -> None:
        while not stop.is_set():
            await client.chat({"model": "m", "messages": []})

    workers = [asyncio.create_task(worker()) for _ in range(128)]
    try:
        await _until(lambda: len(peaks) >= 200, 60)
        before = max(peaks)
        limit = client._limit
        assert limit is not None
        # Saturated windows where 1,000 requests/s at 1 ms each need 2 in flight: halve, then the floor.
        limit.resize(1.0, rate=1000.0, service=0.001)
        assert client.request_limit == 32
        limit.resize(1.0, rate=1000.0, service=0.001)
        assert client.request_limit == 16
        served = len(peaks)
        await _until(lambda: len(peaks) >= served + 64, 60)  # the requests let in before the drop finish
        peaks.clear()
        await _until(lambda: len(peaks) >= 300, 60)
    finally:
        stop.set()
        await asyncio.gather(*workers)
        await client.aclose()
        await runner.cleanup()
    assert before == 64  # at the ceiling, the server had as many as the client allowed
    assert client.max_requests == 64
    assert max(peaks) <= 16  # after the decisions, never more than the limit of the moment
    told = [record.getMessage() for record in caplog.records if "saturated" in record.getMessage()]
    assert len(told) == 1
    assert f"127.0.0.1:{port}/v1" in told[0] and "fewer than 64 in flight" in told[0]
