"""What tracing costs the driver: CPU per rollout with telemetry off, and on (exporting to a loopback receiver).

The runner bench of ``gate_cost.py`` (``driver_ours.py``: runner, engine, store, 2 model
calls and 1 tool call per rollout against ``fake_server.py``), run alternately with no
endpoint and with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP sink in its own
process (it answers 200 to ``POST /v1/traces`` and counts bytes), so the export's HTTP and
protobuf encoding are paid by the driver as in a real run. Each rollout makes 7 spans.

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", default="64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--cores", default="0,1", help="driver core, server core ('none': no pinning)")
    args = parser.parse_args()
    driver_core = server_core = None
    if args.cores != "none" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        driver_core, server_core = (int(v) for v in args.cores.split(","))
    base = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    base["PYTHONPATH"] = os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])
    figures: dict[tuple[int, str], list[dict[str, object]]] = {}
    with fake_server(0.0, server_core) as url, otlp_sink(server_core) as sink:
        variants = {"off": base, "on (OTLP to loopback)": {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": sink}}
        for in_flight in (int(value) for value in args.in_flight.split(",")):
            for repeat in range(args.repeats):
                names = list(variants)
                names = names[repeat % 2 :] + names[: repeat % 2]
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
    print("| in flight | telemetry | CPU ms/rollout (median) | vs off | rollouts/s (median) | failures |")
    print("|---:|---|---:|---:|---:|---:|")
    for (in_flight, name), runs in figures.items():
        cpu = statistics.median(float(run["cpu_ms_per_rollout"]) for run in runs)  # type: ignore[arg-type]
        off = statistics.median(float(run["cpu_ms_per_rollout"]) for run in figures[(in_flight, "off")])  # type: ignore[arg-type]
        speed = statistics.median(float(run["rollouts_per_s"]) for run in runs)  # type: ignore[arg-type]
        failures = sum(int(run["failures"]) for run in runs)  # type: ignore[call-overload]
        print(f"| {in_flight} | {name} | {cpu:.3f} | {cpu / off:.3f} | {speed:,.0f} | {failures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
