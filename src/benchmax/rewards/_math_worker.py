"""The math-verify worker: JSON lines in, JSON lines out, one request at a time.

Run as ``python -P _math_worker.py MEMORY_MB`` by :mod:`benchmax.rewards._maths`.
Requests run in this process's main thread, so math-verify's own signal-based
timeouts work here too; the parent still kills the process at a hard deadline,
because sympy can stall inside code where no signal handler gets to run.
"""

import json
import re
import resource
import sys

_PROSE = re.compile(r"(?<!\\)\b[A-Za-z]{2,}\s+[A-Za-z]{2,}\s+[A-Za-z]{2,}")


def _parse(parse, text):
    """Short bare answers (``(0,1]``, ``2x+1``) read as LaTeX math; prose as it comes.

    Unwrapped, math-verify reads ``2x+1`` as ``2`` and ``(0,1]`` as nothing.
    """
    bare = "$" not in text and "\\boxed" not in text
    if bare and len(text) <= 200 and not _PROSE.search(text):
        parsed = parse(f"${text}$")
        if parsed:
            return parsed
    return parse(text)


def main():
    memory_mb = int(sys.argv[1])
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        from math_verify import parse, verify
    except ImportError as exc:
        print(json.dumps({"ready": False, "error": str(exc)}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            golds = [_parse(parse, gold) for gold in request["gold"]]
            answer = _parse(parse, request["answer"])
            equal = any(
                verify(
                    gold,
                    answer,
                    float_rounding=request["float_rounding"],
                    strict=request["strict"],
                    timeout_seconds=request["timeout"],
                )
                for gold in golds
                if gold
            )
            reply = {"equal": bool(equal), "gold_parsed": all(golds), "answer_parsed": bool(answer)}
        except Exception as exc:
            reply = {"equal": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
