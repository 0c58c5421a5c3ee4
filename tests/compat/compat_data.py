"""Data-contract cases checked against 0.2.5: SFT files (valid and broken) and bundle metadata.

The SFT cases are generated from a fixed seed, so every run (and the
recording) sees the same files: rows assembled from good and bad messages,
tool definitions and metadata, plus hand-written byte-level oddities.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


def _call(index: int, name: str = "add", arguments: str = '{"a": 1}') -> dict[str, Any]:
    return {"id": f"c{index}", "type": "function", "function": {"name": name, "arguments": arguments}}


_TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}, "description": "Add."}}
_MESSAGES: list[Any] = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "user", "content": ""},
    {"role": "user", "content": 3},
    {"role": "user", "content": "u", "weight": 1},
    {"role": "assistant", "content": "a"},
    {"role": "assistant", "content": None},
    {"role": "assistant", "content": "a", "weight": 0},
    {"role": "assistant", "content": "a", "weight": 0.5},
    {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
    {"role": "assistant", "content": None, "tool_calls": [_call(1)]},
    {"role": "assistant", "content": None, "tool_calls": [_call(2), _call(3)]},
    {"role": "assistant", "tool_calls": [_call(4, "mul")]},
    {"role": "assistant", "tool_calls": [_call(5, arguments="[1]")]},
    {"role": "assistant", "tool_calls": [_call(6, arguments="{bad")]},
    {"role": "assistant", "tool_calls": [{"id": "", "type": "x", "function": {"name": ""}}]},
    {"role": "assistant", "tool_calls": []},
    {"role": "tool", "content": "r", "tool_call_id": "c1"},
    {"role": "tool", "content": "r", "tool_call_id": "c2"},
    {"role": "tool", "content": "r", "tool_call_id": "c3"},
    {"role": "tool", "content": "r", "tool_call_id": "c9"},
    {"role": "tool", "content": 5, "tool_call_id": ""},
    {"role": "robot", "content": "x"},
    {"content": "x"},
    "not an object",
    {"role": "assistant", "content": "a", "extra": 1},
]
_GOOD = [
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    {
        "tools": [_TOOL],
        "messages": [
            {"role": "user", "content": "1+2"},
            {"role": "assistant", "content": None, "tool_calls": [_call(1)], "weight": 0},
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
            {"role": "assistant", "content": "3"},
        ],
        "metadata": {"é": [1, 2.5, None, True], "nested": {"b": 1, "a": 2}},
    },
]
_RAW = [
    "",
    "\n\n",
    '{"messages": [{"role":"user","content":"u"},{"role":"assistant","content":"a"}]}\n\ufeff',
    '\ufeff{"messages": []}',
    '{"a": 1, "a": 2}',
    '{"messages": NaN}',
    "[1,2]",
    '{"messages": [{"role":"user","content":"u"},{"role":"assistant","content":"a"}], "metadata": {"x": 1e999}}',
    '{"messages": [{"role":"user","content":"u"},{"role":"assistant","content":"a"}]}\r\n   \n{"messages": [1]}',
    "[" * 70 + "]" * 70,
    "not json",
]


def sft_files(directory: Path, count: int = 150) -> list[str]:
    """Write the SFT case files into ``directory``; their paths, in a fixed order."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20260101)
    texts: list[str] = []
    for _ in range(count):
        if rng.random() < 0.3:
            row: Any = json.loads(json.dumps(rng.choice(_GOOD)))
        else:
            row = {"messages": [rng.choice(_MESSAGES) for _ in range(rng.randint(1, 6))]}
            pick = rng.random()
            if pick < 0.4:
                row["tools"] = [_TOOL]
            elif pick < 0.5:
                row["tools"] = []
            elif pick < 0.55:
                row["tools"] = [
                    _TOOL,
                    _TOOL,
                    {"type": "x"},
                    "t",
                    {
                        "type": "function",
                        "function": {"name": "h", "parameters": {"type": "array"}, "description": 3, "zz": 1},
                    },
                ]
            elif pick < 0.6:
                row["tools"] = "nope"
            pick = rng.random()
            if pick < 0.2:
                row["metadata"] = {"a": 1}
            elif pick < 0.25:
                row["metadata"] = {"_castform_x": 1, "tools": []}
            elif pick < 0.3:
                row["metadata"] = []
            if rng.random() < 0.05:
                row["extra"] = 1
        texts.append(json.dumps(row, ensure_ascii=False) + "\n")
    texts.append("".join(texts[:40]))
    texts.extend(_RAW)
    paths = []
    for index, text in enumerate(texts):
        path = directory / f"case{index:03d}.jsonl"
        path.write_bytes(text.encode("utf-8"))
        paths.append(str(path))
    bad = directory / "bad_utf8.jsonl"
    bad.write_bytes(b'{"messages": "\xff"}\n')
    paths.append(str(bad))
    return paths


BUNDLE_CASES: list[dict[str, Any]] = [
    {
        "pip_dependencies": [
            "Requests[Socks,security]>=2,<3",
            "numpy==2.*; python_version >= '3.11'",
            "pkg @ https://x/p.whl",
        ],
        "python_version": "3.12",
        "benchmax_version": "0.2.5",
        "env_class_source": "class Env(BaseEnv):\n    max_turns = 1  # é\n",
        "pickled": "payload-1",
    },
    {
        "pip_dependencies": [],
        "python_version": "3.11",
        "benchmax_version": "0.3.0",
        "env_class_source": None,
        "pickled": "",
    },
    {
        "pip_dependencies": ["torch>=2", "Torch<3"],
        "python_version": "3.12",
        "benchmax_version": "0.2.5",
        "env_class_source": None,
        "pickled": "x",
    },
    {
        "pip_dependencies": ["not a requirement!"],
        "python_version": "3.12",
        "benchmax_version": "0.2.5",
        "env_class_source": None,
        "pickled": "x",
    },
]
