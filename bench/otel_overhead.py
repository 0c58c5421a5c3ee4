"""What tracing costs the driver: CPU per rollout with telemetry off, and on (exporting to a loopback receiver).

The runner bench of ``gate_cost.py`` (``driver_ours.py``: runner, engine, store, 2 model
calls and 1 tool call per rollout against ``fake_server.py``), run alternately with no
endpoint and with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP sink in its own
process (it answers 200 to ``POST /v1/traces`` and counts bytes), so the export's HTTP and
protobuf encoding are paid by the driver as in a real run. Each rollout makes 7 spans.

"Off costs nothing measurable" is measured against the code before telemetry existed:
``--base-commit`` (default ae0862e, the commit the telemetry branch started from) is
``git archive``d to a temporary folder and the same driver runs with that ``src`` first on
its ``PYTHONPATH``, alternating with the other variants; "vs base" is each variant's CPU
per rollout over that one's.

    python bench/otel_overhead.py --in-flight 64 --repeats 3 --rollouts 2048
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import _pin, fake_server, run_driver  # noqa: E402

SINK = """
import sys
from aiohttp import web
received = {"requests": 0, "bytes": 0}
async def traces(request):
    body = await request.read()
    received["requests"] += 1
    received["bytes"] += len(body)
    return web.Response(body=b"", content_type="application/x-protobuf")
app = web.Application(client_max_size=64 * 2**20)
app.router.add_post("/v1/traces", traces)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


@contextlib.contextmanager
def otlp_sink(core: int | None) -> Iterator[str]:
    from benchmax.testing import free_port

    port = free_port()
    process = subprocess.Popen([*_pin(core), sys.executable, "-c", SINK, str(port)])
    try:
        import socket
        import time

        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def base_source(commit: str) -> Iterator[Path | None]:
    """The ``src`` folder of ``commit`` of this repository, unpacked to a temporary folder (``None``: no commit)."""
    if not commit:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="benchmax-base-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(BENCH.parent), "archive", commit, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        yield Path(folder) / "src"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", default="64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--cores", default="0,1", help="driver core, server core ('none': no pinning)")
    parser.add_argument("--base-commit", default="ae0862e", help="the code before telemetry ('': leave it out)")
    args = parser.parse_args()
    driver_core = server_core = None
    if args.cores != "none" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        driver_core, server_core = (int(v) for v in args.cores.split(","))
    base = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    base["PYTHONPATH"] = os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])
    figures: dict[tuple[int, str], list[dict[str, object]]] = {}
    with fake_server(0.0, server_core) as url, otlp_sink(server_core) as sink, base_source(args.base_commit) as src:
        variants = {"off": base, "on (OTLP to loopback)": {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": sink}}
        if src is not None:
            before = os.pathsep.join([str(BENCH), str(src)])
            variants = {f"base {args.base_commit} (no telemetry)": {**base, "PYTHONPATH": before}, **variants}
        for in_flight in (int(value) for value in args.in_flight.split(",")):
            for repeat in range(args.repeats):
                names = list(variants)
                names = names[repeat % len(names) :] + names[: repeat % len(names)]
                for name in names:
                    command = [
                        *_pin(driver_core), sys.executable, str(BENCH / "driver_ours.py"), "--base-url", url,
                        "--in-flight", str(in_flight), "--group-size", str(args.group_size),
                        "--rollouts", str(args.rollouts),
                    ]  # fmt: skip
                    result = run_driver(command, variants[name], 600)
                    figures.setdefault((in_flight, name), []).append(result)
                    print(
                        f"{name:>22} x{in_flight} #{repeat}: {result['cpu_ms_per_rollout']} ms CPU, "
                        f"{result['rollouts_per_s']} rollouts/s, {result['failures']} failures",
                        file=sys.stderr,
                        flush=True,
                    )
    reference = next(iter(variants))  # the base commit when measured, else "off"
    print(f"| in flight | telemetry | CPU ms/rollout (median) | vs {reference.split(' (')[0]} | rollouts/s (median) "
          "| failures |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|")

    def median_cpu(runs: list[dict[str, object]]) -> float:
        return statistics.median(float(run["cpu_ms_per_rollout"]) for run in runs)  # type: ignore[arg-type]

    for (in_flight, name), runs in figures.items():
        cpu = median_cpu(runs)
        against = median_cpu(figures[(in_flight, reference)])
        speed = statistics.median(float(run["rollouts_per_s"]) for run in runs)  # type: ignore[arg-type]
        failures = sum(int(run["failures"]) for run in runs)  # type: ignore[call-overload]
        print(f"| {in_flight} | {name} | {cpu:.3f} | {cpu / against:.3f} | {speed:,.0f} | {failures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
