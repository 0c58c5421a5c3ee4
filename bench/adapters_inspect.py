"""An Inspect AI task run by Inspect's own runner and by benchmax (``inspect:``), on the same fake server.

Both sides run the same task file (N samples, ``system_message`` + ``prompt_template`` + ``generate``,
scorers ``match`` and ``includes``) against one scripted OpenAI-compatible server in its own process
(``python -m benchmax.testing``, echo policy), at the same concurrency: Inspect's ``eval`` with
``max_connections=C`` (through the small httpx provider in ``tests/adapters/inspect_scripted.py``: Inspect's
OpenAI provider needs openai>=3.4, which verifiers 0.4's pin keeps out of benchmax's environment),
benchmax's ``benchmax eval inspect:FILE@TASK --concurrency C``. Each side is a fresh process; the figure is
samples per second over the whole process (imports, loading, the run, writing its log or store), median of
``--repeats``, the two sides alternating.

    python bench/adapters_inspect.py --samples 400 --concurrency 32 --repeats 3
    python bench/adapters_inspect.py --smoke
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

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate, prompt_template, system_message


@task
def sums(samples=100):
    return Task(
        dataset=[Sample(input=f"What is {i}+{i}?", target=str(2 * i), id=i) for i in range(int(samples))],
        solver=[system_message("Answer with a number."), prompt_template("Question: {prompt}"), generate()],
        scorer=[match(), includes()],
    )
"""

INSPECT = """
import sys
sys.path.insert(0, {support!r})
import inspect_scripted
from inspect_ai import eval
(log,) = eval({spec!r}, task_args={{"samples": {samples}}}, model="scripted/scripted", model_base_url={url!r},
              log_dir={logs!r}, display="none", max_connections={concurrency}, max_samples={concurrency})
assert log.status == "success", log.error
assert len(log.samples) == {samples}
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_inspect(spec: str, url: str, samples: int, concurrency: int, work: Path) -> float:
    script = INSPECT.format(
        support=str(ROOT / "tests" / "adapters"), spec=spec, samples=samples, url=url,
        logs=str(work / f"logs-{time.monotonic_ns()}"), concurrency=concurrency,
    )  # fmt: skip
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], check=True, env=environment())
    return time.perf_counter() - started


def run_benchmax(spec: str, url: str, samples: int, concurrency: int, work: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "eval", f"inspect:{spec}", "--env-arg", f"samples={samples}",
            "--base-url", url, "--model", "scripted", "--concurrency", str(concurrency), "--split", "eval",
            "--run-dir", str(work / f"run-{time.monotonic_ns()}"), "--no-progress",
        ],
        check=True, env=environment(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def environment() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one short run of each side (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.samples, args.repeats = 8, 1
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen([sys.executable, "-m", "benchmax.testing", "--port", str(port)], env=environment())
    try:
        _wait(url)
        with tempfile.TemporaryDirectory() as directory:
            work = Path(directory)
            (work / "sums.py").write_text(TASK)
            spec = f"{work / 'sums.py'}@sums"
            times: dict[str, list[float]] = {"inspect eval": [], "benchmax eval inspect:": []}
            for repeat in range(args.repeats):
                sides = [("inspect eval", run_inspect), ("benchmax eval inspect:", run_benchmax)]
                for name, side in sides if repeat % 2 == 0 else sides[::-1]:
                    times[name].append(side(spec, url, args.samples, args.concurrency, work))
    finally:
        server.terminate()
        server.wait()
    print(f"{args.samples} samples, concurrency {args.concurrency}, {args.repeats} repeats (median), whole process")
    rates = {name: args.samples / statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"  {name:<24} {statistics.median(values):7.2f} s   {rates[name]:8.1f} samples/s")
    print(f"  ratio benchmax / inspect: {rates['benchmax eval inspect:'] / rates['inspect eval']:.2f}x")


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
