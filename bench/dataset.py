"""How long ``JsonlDataset`` takes to load the first rows of a large file.

Validation and capped runs ask for ``max_examples``; the reader must stream, so
the first 1,000 rows of a 1 GB file cost what 1,000 rows cost. The file is
generated once (about 1 KB per row) and kept in /tmp; it is never committed.

    python bench/dataset.py                       # 1 GB, first 1,000 rows
    python bench/dataset.py --size-mb 50 --rows 100
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import orjson

from benchmax.envs import JsonlDataset


def generate(path: Path, size_bytes: int) -> None:
    """Rows of about 1 KB each, distinct payloads, until the file reaches ``size_bytes``."""
    filler = "x" * 900
    written = 0
    index = 0
    partial = path.with_suffix(".partial")
    with partial.open("wb") as handle:
        while written < size_bytes:
            chunk = b"".join(
                orjson.dumps(
                    {
                        "prompt_messages": [{"role": "user", "content": f"What is {i} + {i + 1}?"}],
                        "answer": 2 * i + 1,
                        "notes": filler,
                    }
                )
                + b"\n"
                for i in range(index, index + 10_000)
            )
            handle.write(chunk)
            written += len(chunk)
            index += 10_000
    partial.rename(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="/tmp/benchmax-bench-dataset.jsonl")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    path = Path(args.path)
    size = args.size_mb * 1024 * 1024
    if not path.exists() or path.stat().st_size < size:
        started = time.perf_counter()
        generate(path, size)
        print(f"generated {path} ({path.stat().st_size / 2**20:,.0f} MB) in {time.perf_counter() - started:.1f}s")
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        dataset = JsonlDataset(path, max_examples=args.rows)
        timings.append(time.perf_counter() - started)
        assert len(dataset) == args.rows, len(dataset)
    result = {
        "file_mb": round(path.stat().st_size / 2**20),
        "rows": args.rows,
        "first_load_s": round(timings[0], 4),
        "best_of_3_s": round(min(timings), 4),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
