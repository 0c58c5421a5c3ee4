"""A verifiers taskset run by verifiers' own runner and by benchmax (``verifiers:``), on the same fake server.

Both sides run the same taskset package (N tasks, a system prompt and a question, two weighted
``@vf.reward`` methods) against one scripted OpenAI-compatible server in its own process
(``python -m benchmax.testing``, echo policy), at the same concurrency: verifiers' ``load_environment``,
``serving()`` and ``run_slot`` for every task with C slots in flight (the ``null`` harness: its chat
program runs once per rollout, as a subprocess, as verifiers runs it), and
``benchmax eval verifiers:TASKSET --concurrency C``. verifiers prepares that program with ``uv``; a ``uv``
stand-in on ``PATH`` points it at this interpreter, which has its packages (no download). Each side is a
fresh process; the figure is tasks per second over the whole process, median of ``--repeats``, sides
alternating.

    python bench/adapters_verifiers.py --tasks 200 --concurrency 32 --repeats 3
    python bench/adapters_verifiers.py --smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TASKSET = """
import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=2.0)
    async def correct(self, task, trace) -> float:
        return float(task.answer in trace.last_reply)

    @vf.reward(weight=0.5)
    async def brief(self, trace) -> float:
        return float(len(trace.last_reply) <= 40)


class SumConfig(vf.TasksetConfig):
    count: int = 100


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self):
        for a in range(self.config.count):
            data = SumData(id=f"sum-{a}", prompt=f"What is {a} + {a}?", system_prompt="Answer with a number.",
                           answer=str(2 * a))
            yield SumTask(data, self.config.task)


__all__ = ["SumTaskset"]
"""

UV_STANDIN = """#!/bin/sh
case "$*" in
  *--help*) echo "--script"; exit 0 ;;
  "sync --script"*) exit 0 ;;
  "python find --script"*) echo "{python}"; exit 0 ;;
esac
exit 2
"""

VERIFIERS = """
import asyncio
import verifiers.v1 as vf
from verifiers.v1.clients import EvalClientConfig, ModelContext
from verifiers.v1.envs.single_agent import SingleAgentEnvConfig
from verifiers.v1.runtimes import SubprocessConfig


async def main():
    config = SingleAgentEnvConfig.model_validate(
        {{"taskset": {{"id": "vf_bench_sums", "count": {tasks}}},
          "agent": {{"harness": {{"id": "null"}}, "runtime": SubprocessConfig()}}}}
    )
    env = vf.load_environment(config)
    ctx = ModelContext(model="scripted", client=EvalClientConfig(base_url={url!r}, api_key_var="BENCH_VF_KEY"))
    gate = asyncio.Semaphore({concurrency})

    async def one(slot):
        async with gate:
            return (await env.run_slot(slot, ctx)).traces[0]

    async with env.serving():
        traces = await asyncio.gather(*(one(slot) for task in env.taskset for slot in env.slots(task)))
    assert len(traces) == {tasks} and all(trace.ok for trace in traces), [t.errors for t in traces if not t.ok][:3]


asyncio.run(main())
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_verifiers(url: str, tasks: int, concurrency: int, work: Path) -> float:
    script = VERIFIERS.format(url=url, tasks=tasks, concurrency=concurrency)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], check=True, env=environment(work), cwd=work)
    return time.perf_counter() - started


def run_benchmax(url: str, tasks: int, concurrency: int, work: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "eval", "verifiers:vf_bench_sums", "--env-arg",
            f'taskset={{"count": {tasks}}}', "--base-url", url, "--model", "scripted", "--concurrency",
            str(concurrency), "--split", "eval", "--run-dir", str(work / f"run-{time.monotonic_ns()}"), "--no-progress",
        ],
        check=True, env=environment(work), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def environment(work: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), str(work), os.environ.get("PYTHONPATH", "")]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PATH": f"{work / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(work / "home"),
        "BENCH_VF_KEY": "sk-bench",
        "NO_COLOR": "1",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one short run of each side (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.repeats = 4, 1
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        (work / "vf_bench_sums").mkdir()
        (work / "vf_bench_sums" / "__init__.py").write_text(TASKSET)
        (work / "bin").mkdir()
        (work / "bin" / "uv").write_text(UV_STANDIN.format(python=sys.executable))
        (work / "bin" / "uv").chmod(0o755)
        serve = [sys.executable, "-m", "benchmax.testing", "--port", str(port)]
        server = subprocess.Popen(serve, env=environment(work))
        try:
            _wait(url)
            times: dict[str, list[float]] = {"verifiers run_slot": [], "benchmax eval verifiers:": []}
            for repeat in range(args.repeats):
                sides = [("verifiers run_slot", run_verifiers), ("benchmax eval verifiers:", run_benchmax)]
                for name, side in sides if repeat % 2 == 0 else sides[::-1]:
                    times[name].append(side(url, args.tasks, args.concurrency, work))
        finally:
            server.terminate()
            server.wait()
    print(f"{args.tasks} tasks, concurrency {args.concurrency}, {args.repeats} repeats (median), whole process")
    rates = {name: args.tasks / statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"  {name:<26} {statistics.median(values):7.2f} s   {rates[name]:8.1f} tasks/s")
    print(f"  ratio benchmax / verifiers: {rates['benchmax eval verifiers:'] / rates['verifiers run_slot']:.2f}x")


def _wait(url: str) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the fake server at {url} did not start")


if __name__ == "__main__":
    main()
