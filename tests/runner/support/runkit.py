"""Helpers shared by the runner, store and CLI tests: datasets, a model policy, the CLI.

Each example's prompt tells the scripted server how to answer: ``#answers: [...]``
picks ``answers[seed % len(answers)]`` (so seeded siblings can differ) and
``#sleep: S`` delays the reply; a ``#script: [...]`` line (see
:mod:`benchmax.testing`) overrides both.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).parent
ENV_FILE = SUPPORT / "scored_env.py"
ENV_SPEC = f"{ENV_FILE}:ScoredEnv"

_ANSWERS = re.compile(r"^#answers: (\[.*\])$", re.MULTILINE)
_SLEEP = re.compile(r"^#sleep: ([0-9.]+)$", re.MULTILINE)


def row(
    answer: str,
    text: str = "question",
    *,
    answers: Sequence[str] | None = None,
    script: Sequence[dict[str, Any]] | None = None,
    sleep: float | None = None,
    bonus: float | None = None,
) -> dict[str, Any]:
    """One dataset line: the model answers from ``answers`` (default: the right answer)."""
    lines = [text, f"#answers: {json.dumps(list(answers or [answer]))}"]
    if sleep is not None:
        lines.append(f"#sleep: {sleep}")
    if script is not None:
        lines.append(f"#script: {json.dumps(list(script))}")
    payload: dict[str, Any] = {"prompt_messages": [{"role": "user", "content": "\n".join(lines)}], "answer": answer}
    if bonus is not None:
        payload["bonus"] = bonus
    return payload


def tiny_png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour, built byte by byte (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b"")


def png_data_uri(width: int = 4, height: int = 3) -> str:
    return "data:image/png;base64," + base64.b64encode(tiny_png(width, height)).decode()


def write_split(directory: Path, rows: Sequence[dict[str, Any]], split: str = "eval") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{split}.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in rows))
    return path


def answers_policy(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted server's policy for prompts built by :func:`row`."""
    text = str(body["messages"][0].get("content") or "")
    found = _ANSWERS.search(text)
    answers = json.loads(found.group(1)) if found else ["(no answers line)"]
    step: dict[str, Any] = {"content": answers[int(body.get("seed") or 0) % len(answers)]}
    delay = _SLEEP.search(text)
    if delay:
        step["sleep"] = float(delay.group(1))
    return step


def cli_env(**extra: str) -> dict[str, str]:
    """The CLI's environment: wide, colourless output so assertions see whole lines."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("BENCHMAX_TEST_")}
    env.update({"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def cli_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "benchmax.cli", *(str(arg) for arg in args)]


def run_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``benchmax ARGS`` in a real subprocess; stdout and stderr together in ``.stdout``."""
    return subprocess.run(
        cli_command(*args),
        cwd=cwd,
        env=env or cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli_command(*args),
        cwd=cwd,
        env=env or cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def events(trace_dir: Path) -> Counter[str]:
    """How many context enters, exits and ``aclose`` calls the env recorded."""
    path = trace_dir / "events.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split(" ", 1)[0] for line in lines)


_CHECKED_ENV = """from benchmax.envs import BaseEnv, JsonlDataset
{prelude}

class CheckedEnv(BaseEnv):
    max_turns = {max_turns}

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{{split}}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return {tools}
{reward}"""
_REWARD = """
    async def compute_reward(self, rollout):
        return {"ok": 1.0}
"""
GOOD_LINE = json.dumps({"prompt_messages": [{"role": "user", "content": "hi"}], "answer": "hi"})


def write_checked_env(
    directory: Path,
    *,
    max_turns: str = "1",
    tools: str = "[]",
    reward: bool = True,
    prelude: str = "",
    splits: dict[str, str] | None = None,
) -> Path:
    """``directory/env.py`` holding ``CheckedEnv``, with data files (default: one good line per split)."""
    directory.mkdir(parents=True, exist_ok=True)
    env_file = directory / "env.py"
    env_file.write_text(
        _CHECKED_ENV.format(prelude=prelude, max_turns=max_turns, tools=tools, reward=_REWARD if reward else "")
    )
    for split, text in (
        splits if splits is not None else {"train": GOOD_LINE + "\n", "eval": GOOD_LINE + "\n"}
    ).items():
        (directory / f"{split}.jsonl").write_text(text)
    return env_file
