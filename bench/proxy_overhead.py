"""What the recording proxy costs: its CPU per model call, and rollouts/s beside the engine's own loop.

Three runs against one ``fake_server.py`` (the scenario of ``scenario.py``: a tool call, then
the answer; two model calls per rollout):

- **proxy CPU per call**: the proxy (``RecordingProxy`` over a ``ClientPool``) runs on the main
  thread's event loop; the agents run on a second thread with a loop of their own, each rollout
  taking a lease, making its two calls with a bare aiohttp client and ending the lease.
  ``time.thread_time`` of the proxy's thread over the steady-state window, divided by the calls
  in it, is the proxy's CPU per call: HTTP in, the checks, the lease, the record, and the
  forwarding through the model client (which the engine pays too). Goal: <= 1 ms at 256 in flight.
- **rollouts/s, proxy**: agents and proxy on one loop, as an in-process agent env runs them.
- **rollouts/s, engine**: ``Engine.run_group`` on the same scenario (``driver_ours.py --path engine``).

    python bench/proxy_overhead.py --in-flight 256 --rollouts 2048
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _harness
import aiohttp
import orjson
from driver_ours import _via_engine
from scenario import TOOLS, prompt

from benchmax.client import ClientPool
from benchmax.proxy import RecordingProxy

BENCH = Path(__file__).resolve().parent


async def _agent(session: aiohttp.ClientSession, base_url: str, key: str, index: int) -> str:
    """The scenario's agent, as an agent program would write it: call, run the tool, call again."""
    question, answer = prompt(index)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(4):
        body = orjson.dumps({"model": "agent", "messages": messages, "tools": TOOLS})
        async with session.post(f"{base_url}/chat/completions", data=body, headers=headers) as reply:
            if reply.status != 200:
                return f"http_{reply.status}"
            data = orjson.loads(await reply.read())
        message = data["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return "ok" if (message.get("content") or "").strip() == str(answer) else "wrong"
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            args = orjson.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(args["a"] + args["b"])})
    return "max_turns"


async def _in_process(args: argparse.Namespace, recorder: _harness.Recorder) -> None:
    """Agents and proxy on one loop: an in-process agent env."""
    pool = ClientPool()
    async with (
        RecordingProxy(pool, model="fake", base_url=args.base_url) as proxy,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
    ):

        async def rollout(index: int) -> list[str]:
            async with proxy.lease(f"r{index}", max_calls=4) as lease:
                return [await _agent(session, lease.base_url, lease.api_key, index)]

        await _harness.closed_loop(rollout, recorder, groups=args.rollouts, concurrent_groups=args.in_flight)
    await pool.aclose()


def _threaded(args: argparse.Namespace) -> dict[str, object]:
    """The proxy alone on the main thread, the agents on another: the proxy thread's CPU per call."""
    recorder = _harness.Recorder(in_flight=args.in_flight)
    marks: list[tuple[float, float]] = []  # (perf_counter, proxy thread CPU), sampled on the proxy loop

    async def serve() -> None:
        pool = ClientPool()
        loop = asyncio.get_running_loop()
        async with RecordingProxy(pool, model="fake", base_url=args.base_url) as proxy:

            async def hold(index: int, ready: concurrent.futures.Future, done: asyncio.Future) -> None:
                async with proxy.lease(f"r{index}", max_calls=4) as lease:
                    ready.set_result((lease.base_url, lease.api_key))
                    await done

            holders: set[asyncio.Task[None]] = set()

            def take(index: int) -> tuple[concurrent.futures.Future, asyncio.Future]:
                ready: concurrent.futures.Future = concurrent.futures.Future()
                done = loop.create_future()
                task = loop.create_task(hold(index, ready, done))
                holders.add(task)
                task.add_done_callback(holders.discard)
                return ready, done

            finished = threading.Event()

            async def agents() -> None:
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

                    async def rollout(index: int) -> list[str]:
                        box: concurrent.futures.Future = concurrent.futures.Future()
                        loop.call_soon_threadsafe(lambda: box.set_result(take(index)))
                        ready, done = await asyncio.wrap_future(box)
                        base_url, key = await asyncio.wrap_future(ready)
                        try:
                            return [await _agent(session, base_url, key, index)]
                        finally:
                            loop.call_soon_threadsafe(done.set_result, None)

                    await _harness.closed_loop(
                        rollout, recorder, groups=args.rollouts, concurrent_groups=args.in_flight
                    )

            thread = threading.Thread(target=lambda: (asyncio.run(agents()), finished.set()), daemon=True)
            thread.start()
            while not finished.is_set():
                marks.append((time.perf_counter(), time.thread_time()))
                await asyncio.sleep(0.01)
            marks.append((time.perf_counter(), time.thread_time()))
        await pool.aclose()

    asyncio.run(serve())
    summary = recorder.summary()
    ends = sorted(recorder.ends)
    t0, t1 = ends[args.in_flight - 1], ends[len(ends) - args.in_flight]
    times, cpu = [m[0] for m in marks], [m[1] for m in marks]
    window = sum(1 for end in ends if t0 < end <= t1)
    calls = 2 * window
    proxy_cpu = _harness._at(times, cpu, t1) - _harness._at(times, cpu, t0)
    return {
        "rollouts_per_s": round(window / max(t1 - t0, 1e-9), 1),
        "calls_in_window": calls,
        "proxy_cpu_ms_per_call": round(1000 * proxy_cpu / max(calls, 1), 3),
        "failures": summary["failures"],
    }


def _measure(args: argparse.Namespace, path: str) -> dict[str, object]:
    recorder = _harness.Recorder(in_flight=args.in_flight)
    if path == "engine":
        engine_args = argparse.Namespace(
            base_url=[args.base_url], group_size=1, rollouts=args.rollouts, in_flight=args.in_flight,
            max_requests=256, fixed_requests=False,
        )  # fmt: skip
        workload = _via_engine(engine_args, recorder)
    else:
        workload = _in_process(args, recorder)
    return asyncio.run(_harness.measure(recorder, workload))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--base-url", help="a running fake server's /v1 (default: start one)")
    args = parser.parse_args()
    server = None
    if args.base_url is None:
        server = subprocess.Popen(
            [sys.executable, str(BENCH / "fake_server.py"), "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        assert server.stdout is not None
        args.base_url = server.stdout.readline().split()[-1]
    try:
        figures = {
            "in_flight": args.in_flight,
            "rollouts": args.rollouts,
            "proxy_alone": _threaded(args),
            "through_proxy": {k: v for k, v in _measure(args, "proxy").items() if k in _KEEP},
            "engine_loop": {k: v for k, v in _measure(args, "engine").items() if k in _KEEP},
        }
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    print(json.dumps(figures, indent=2))


_KEEP = ("rollouts_per_s", "cpu_ms_per_rollout", "failures", "failure_kinds", "loop_lag_p99_ms")

if __name__ == "__main__":
    main()
