"""Running ``benchmax eval`` in child processes that a test can kill, and checking the store after.

Children come from a ``forkserver`` that has imported the CLI once, so each of
the many kill-and-resume rounds starts in milliseconds rather than paying the
interpreter and import start-up again; the child runs the real CLI entry point
(argument parsing, ``--resume`` config rebuild, runner, store) as
``python -m benchmax.cli`` would.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sqlite3
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmax.store import decode_transcript

SUPPORT = Path(__file__).parent
ENV_SPEC = f"{SUPPORT / 'crash_env.py'}:CrashEnv"
_SLEEP = re.compile(r"^#sleep: ([0-9.]+)$", re.MULTILINE)


def rows(count: int, *, sleep: float = 0.0, tool: bool = False) -> list[dict[str, Any]]:
    """Examples whose right answer is ``a{i}``; ``tool`` makes the model call the env's slow tool first."""
    result = []
    for index in range(count):
        text = f"question {index}"
        if sleep:
            text += f"\n#sleep: {sleep}"
        if tool:
            text += "\n#tool"
        result.append({"prompt_messages": [{"role": "user", "content": text}], "answer": f"a{index}"})
    return result


def write_split(directory: Path, items: Sequence[dict[str, Any]], split: str = "eval") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))


def policy(body: dict[str, Any]) -> dict[str, Any]:
    """Deterministic replies: sibling with an even seed answers right, odd seeds answer wrong."""
    messages = body["messages"]
    text = str(messages[0].get("content") or "")
    step: dict[str, Any] = {}
    delay = _SLEEP.search(text)
    if delay:
        step["sleep"] = float(delay.group(1))
    if "#tool" in text and not any(message.get("role") == "tool" for message in messages):
        return {**step, "tool_calls": [{"name": "slow", "arguments": {"seconds": 30}}]}
    index = text.split("\n", 1)[0].rsplit(" ", 1)[-1]
    right = int(body.get("seed") or 0) % 2 == 0
    return {**step, "content": f"a{index}" if right else "wrong"}


def _child(argv: list[str], log: str, env: dict[str, str]) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.update({"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb", **env})
    sys.argv = ["benchmax", *argv]
    from benchmax.cli import main

    main()


_context: Any = None


def start_cli(
    argv: Sequence[str | Path], log: Path, env: Mapping[str, str] | None = None
) -> multiprocessing.Process:
    """``benchmax ARGV`` in a forked child with ``env`` added to its environment; output goes to ``log``."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["benchmax.cli", "crashkit"])
    process = _context.Process(target=_child, args=([str(arg) for arg in argv], str(log), dict(env or {})), daemon=True)
    process.start()
    return process


def run_cli(argv: Sequence[str | Path], log: Path, env: Mapping[str, str] | None = None) -> int | None:
    """``benchmax ARGV`` to the end; returns its exit code."""
    child = start_cli(argv, log, env)
    child.join(120)
    return child.exitcode


def scripted_row(text: str, steps: Sequence[dict[str, Any]], answer: str = "a") -> dict[str, Any]:
    """A dataset row whose model replies are ``steps`` (see :mod:`benchmax.testing`)."""
    content = f"{text}\n#script: {json.dumps(list(steps))}"
    return {"prompt_messages": [{"role": "user", "content": content}], "answer": answer}


def stored_groups(run_dir: Path) -> int:
    """How many groups the store holds (0 while it does not exist yet)."""
    db = run_dir / "run.sqlite"
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT COUNT(*) FROM groups").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def store_state(run_dir: Path) -> dict[str, Any] | None:
    """The store's content (None when no run exists yet), checked for half-written data on the way.

    A run whose meta is not written yet has ``status`` None: it was killed while being created.
    """
    db = run_dir / "run.sqlite"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        groups = dict(conn.execute("SELECT group_id, size FROM groups").fetchall())
        rollouts = conn.execute(
            "SELECT r.rollout_id, r.group_id, r.termination_reason, r.final_text, t.messages"
            " FROM rollouts AS r LEFT JOIN transcripts AS t ON t.seq = r.seq"
        ).fetchall()
        rewards = conn.execute("SELECT rollout_id, component, value, filled FROM reward_rows").fetchall()
        seqs = conn.execute("SELECT COUNT(DISTINCT seq) FROM rollouts").fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None  # the file exists, its schema is not complete yet: as good as no run
        raise
    finally:
        conn.close()
    per_group = Counter(group for _, group, _, _, _ in rollouts)
    ids = [rollout_id for rollout_id, *_ in rollouts]
    problems = []
    if len(ids) != len(set(ids)) or seqs != len(ids):
        problems.append("duplicate rollout ids or seqs")
    if set(per_group) != set(groups) or any(per_group[group] != size for group, size in groups.items()):
        problems.append(f"half-written groups: {dict(per_group)} vs {groups}")
    if any(not reason for _, _, reason, _, _ in rollouts):
        problems.append("a rollout without a termination reason")
    if any(messages is None for *_, messages in rollouts):
        problems.append("a rollout without its transcript")
    if {rollout_id for rollout_id, *_ in rewards} - set(ids):
        problems.append("rewards for rollouts that are not stored")
    return {
        "status": json.loads(meta["status"]) if "status" in meta else None,
        "groups": set(groups),
        "rollouts": {
            rollout_id: (reason, final_text, decode_transcript(messages))
            for rollout_id, _, reason, final_text, messages in rollouts
        },
        "rewards": {(rollout_id, component): (value, filled) for rollout_id, component, value, filled in rewards},
        "problems": problems,
    }
