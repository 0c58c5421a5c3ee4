"""Peak memory of reading an OTLP/JSON trace file (what ``benchmax import`` does first), against its size.

Generates an agent-like export once in a temporary folder: traces of ``--calls``
model calls each until the file holds ``--mib`` MiB, every call's
``gen_ai.input.messages`` carrying the whole history so far (as agents resend it),
each message ``--message-chars`` long, spans in the current GenAI conventions,
each span with ``--attributes`` short attributes of other instrumentations and
``--other-spans`` non-GenAI spans (tools, HTTP) per call. Two layouts of the same spans:
``jsonl``, one ``ExportTraceServiceRequest`` a line (one line per trace, as the
collector's file exporter writes them), and ``document``, the whole file one
request (written with a newline between values, so it is not one line). Each read runs in a fresh
process (``read_traces``), which prints its peak RSS (``VmHWM``, reset just before
the read) less its RSS before the read; the figure printed is that over the file's size.

``--src`` reads with another source tree first on ``PYTHONPATH`` (e.g. a
``git archive`` of the commit before a change), so both run on the same file:

    python bench/otlp_import_memory.py --mib 60
    git archive HEAD~3 src | tar -x -C /tmp/before && python bench/otlp_import_memory.py --src /tmp/before/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READ = """
import sys
from benchmax.traces import read_traces
def status_kib(field):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # the peak (VmHWM) starts again from the RSS now: imports before the read do not count
before = status_kib("VmRSS")
read = read_traces(sys.argv[1])
print(len(read.conversations), status_kib("VmHWM") - before)
"""


def _attribute(key: str, value: str | int) -> dict[str, object]:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value) if isinstance(value, int) else value}}


def _small_attributes(count: int, call: int) -> list[dict[str, object]]:
    """What instrumentations add beside the GenAI ones (HTTP, process, SDK details): many short values."""
    return [
        _attribute(f"app.detail.{index}", f"v{call}-{index}" if index % 2 else call + index) for index in range(count)
    ]


def _trace(number: int, calls: int, chars: int, attributes: int, others: int) -> list[dict[str, object]]:
    trace_id = f"{number:032x}"
    history: list[dict[str, object]] = [{"role": "user", "parts": [{"type": "text", "content": "q" * chars}]}]
    spans = []
    for call in range(calls):
        answer = {"role": "assistant", "parts": [{"type": "text", "content": chr(97 + call % 26) * chars}]}
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{number * 1000 + call:016x}",
                "name": "chat gpt-test",
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + call * 1000),
                "endTimeUnixNano": str(1_700_000_000_000_000_000 + call * 1000 + 500),
                "attributes": [
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.request.model", "gpt-test"),
                    _attribute("gen_ai.usage.input_tokens", 100 + call),
                    _attribute("gen_ai.usage.output_tokens", 10),
                    _attribute("gen_ai.input.messages", json.dumps(history)),
                    _attribute("gen_ai.output.messages", json.dumps([{**answer, "finish_reason": "stop"}])),
                    *_small_attributes(attributes, call),
                ],
            }
        )
        spans.extend(
            {
                "traceId": trace_id,
                "spanId": f"{(number * 1000 + call) * 100 + other:016x}",
                "name": "execute_tool run" if other % 2 else "HTTP POST",
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + call * 1000 + 600 + other),
                "endTimeUnixNano": str(1_700_000_000_000_000_000 + call * 1000 + 900),
                "attributes": _small_attributes(attributes, call),
            }
            for other in range(others)
        )
        history = [*history, answer, {"role": "user", "parts": [{"type": "text", "content": "go on"}]}]
    return spans


def _request(spans: list[dict[str, object]]) -> dict[str, object]:
    resource = {"attributes": [_attribute("service.name", "recorded-agent")]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "agent"}, "spans": spans}]}]}


def generate(folder: Path, mib: float, calls: int, chars: int, attributes: int, others: int) -> tuple[Path, Path]:
    """The two layouts of one set of traces, traces added until the JSONL file holds ``mib`` MiB."""
    jsonl, document = folder / "traces.jsonl", folder / "traces.json"
    all_spans: list[dict[str, object]] = []
    size = 0
    with jsonl.open("w") as handle:
        number = 0
        while size < mib * 1024 * 1024:
            spans = _trace(number, calls, chars, attributes, others)
            line = json.dumps(_request(spans), separators=(",", ":")) + "\n"
            handle.write(line)
            size += len(line)
            all_spans.extend(spans)
            number += 1
    document.write_text(json.dumps(_request(all_spans), indent=0))
    return jsonl, document


def measure(path: Path, src: Path) -> tuple[int, float]:
    """Conversations read, and the read's peak RSS in MiB above the process's RSS before it."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", READ, str(path)], env=env, capture_output=True, text=True, check=True)
    conversations, kib = out.stdout.split()
    return int(conversations), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=60.0, help="size of the JSONL file to generate")
    parser.add_argument("--calls", type=int, default=8, help="model calls per trace")
    parser.add_argument("--message-chars", type=int, default=200)
    parser.add_argument("--attributes", type=int, default=24, help="short non-GenAI attributes per span")
    parser.add_argument("--other-spans", type=int, default=2, help="non-GenAI spans (tools, HTTP) per model call")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="source tree to read with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="otlp-bench-") as folder:
        files = generate(Path(folder), args.mib, args.calls, args.message_chars, args.attributes, args.other_spans)
        print(f"src: {args.src}")
        for path in files:
            size = path.stat().st_size / (1024 * 1024)
            conversations, peak = measure(path, args.src)
            print(
                f"{path.suffix[1:]:>5}: {size:7.1f} MiB, {conversations} traces; "
                f"peak RSS above the start {peak:7.1f} MiB = {peak / size:5.2f}x the file"
            )


if __name__ == "__main__":
    main()
