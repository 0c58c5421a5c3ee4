"""Real runs for the inspector tests (used by ``conftest.py``): evaluated through the scripted model server.

Run ``a`` and run ``b`` share a dataset so they can be compared; their rollouts
cover tool calls, log records in every phase (one with a traceback), a model
error, and a reply carrying an XSS payload.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import benchmax
from benchmax.envs import BaseEnv, ListDataset
from benchmax.testing import ScriptedServer

logger = logging.getLogger("tests.inspector.env")

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script></pre><b id=injected>bold</b>'
API_KEY = "sk-inspector-test-0123456789abcdef"
TOOL_CALL = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}


def _script(*steps: dict[str, Any]) -> str:
    return "#script: " + json.dumps(list(steps))


ROWS = [
    ("add 1 and 2", [TOOL_CALL, {"content": "3"}]),
    ("say something nasty", [{"content": XSS}]),
    ("this one breaks", [{"status": 400, "message": "bad request from the scripted server"}]),
    ("answer wrongly", [{"content": "4"}]),
    ("add again", [TOOL_CALL, {"content": "3"}]),
]


class InspectEnv(BaseEnv):
    """Calls an ``add`` tool and logs from every phase; ``lenient`` also passes "4".

    ``format`` differs between even and odd samples, so groups carry signal.
    """

    max_turns = 3

    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient

    async def create_dataset(self, split: str, base_dir: Path, *, max_examples: int | None = None) -> Any:
        return ListDataset(
            [{"prompt_messages": [{"role": "user", "content": f"{text}\n{_script(*steps)}"}]} for text, steps in ROWS]
        )

    async def list_tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **kwargs: Any) -> Any:
        logger.info("adding %s and %s", kwargs["a"], kwargs["b"])
        try:
            raise ValueError("the tool tripped on purpose")
        except ValueError:
            logger.exception("tool problem recorded with a traceback")
        return kwargs["a"] + kwargs["b"]

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        answer = rollout.messages[-1].get("content") or ""
        logger.warning("scoring answer %s", answer)
        good = answer == "3" or (self.lenient and answer == "4")
        sample = int(rollout.rollout_id.rsplit("#", 1)[-1])
        return {"correct": float(good), "format": 0.0 if not answer.strip() else 0.5 if sample % 2 else 0.25}


def make_runs(root: Path) -> Path:
    """Evaluate run ``a`` and run ``b`` (group size 3) into ``root`` through the scripted server."""
    os.environ["BENCHMAX_INSPECT_TEST_KEY"] = API_KEY
    try:
        with ScriptedServer() as server:
            for name, lenient in (("a", False), ("b", True)):
                benchmax.evaluate(
                    InspectEnv(lenient=lenient),
                    base_url=server.base_url,
                    model="scripted",
                    group_size=3,
                    run_dir=root / name,
                    api_key_env="BENCHMAX_INSPECT_TEST_KEY",
                    max_failure_rate=1.0,  # its failures are what the pages show: the run itself completes
                )
    finally:
        os.environ.pop("BENCHMAX_INSPECT_TEST_KEY", None)
    return root


def write_synthetic_groups(
    writer: Any, start: int, count: int, *, group_size: int = 2, tokens: bool = False, traced: bool = False
) -> None:
    """Store ``count`` finished groups straight through the writer (a run "still writing").

    ``traced``: each group's first sample carries an OpenTelemetry trace id (its siblings none)."""
    from benchmax.envs import RolloutOutcome, TurnRecord, Usage
    from benchmax.store import GroupWrite

    now = time.time()
    for index in range(start, start + count):
        example_id = f"live{index:04d}"
        outcomes = tuple(
            RolloutOutcome(
                rewards={"correct": float(sample % 2)},
                termination_reason="finished",
                rollout_id=f"eval/{example_id}#{sample}",
                example_id=example_id,
                split="eval",
                messages=[
                    {"role": "user", "content": f"question {index}"},
                    {"role": "assistant", "content": f"answer {index}.{sample}"},
                ],
                turns=(
                    TurnRecord(
                        0,
                        now,
                        0.01,
                        0.0,
                        "stop",
                        Usage(5, 3),
                        prompt_token_ids=(7, 8, 9, 10, 11) if tokens else None,
                        completion_token_ids=(101, 102, 103) if tokens else None,
                        completion_logprobs=(-0.05, -2.5, -0.01) if tokens else None,
                    ),
                ),
                started_at=now,
                ended_at=now + 0.01,
                trace_id=f"{index + 1:016x}{sample + 1:016x}" if traced and sample == 0 else None,
            )
            for sample in range(group_size)
        )
        writer.write_group(
            GroupWrite(
                group_id=f"eval/{example_id}",
                example_id=example_id,
                example_idx=index,
                batch=0,
                outcomes=outcomes,
                sample_indices=tuple(range(group_size)),
                started_at=now,
                ended_at=now,
            )
        )
    writer.flush()


# -- a vision run: images in prompts and tool results, tool errors, JSON tool results -------------

JS_URL = "javascript:window.__xss=3"
HOSTILE_FIELD = '<img src=x onerror="window.__xss=4"><b id=injected-field>field</b>'
REMOTE = "https://images.example.invalid/cat.png?size=big&quote=%22%3E%3Cscript%3E"


def png_uri(width: int, height: int) -> str:
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = b"".join(b"\x00" + bytes((30, 120, 200)) * width for _ in range(height))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(pixels))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


VISION_TOOLS = {"tool_calls": [
    {"id": "call_zoom", "name": "zoom", "arguments": {"x": 1}},
    {"id": "call_lookup", "name": "lookup", "arguments": {"city": "Paris"}},
    {"id": "call_nope", "name": "nope", "arguments": {}},
]}  # fmt: skip
OVERSIZED = "data:image/png;base64," + "A" * 2_100_000
HTML_DATA = "data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9NTwvc2NyaXB0Pg=="


def vision_rows() -> list[dict[str, Any]]:
    """Prompts carrying a small PNG, a remote image, hostile URLs and an oversized data URI.

    The scripted server reads scripts from string contents only, so each rides in the system message.
    """

    def system(*steps: dict[str, Any]) -> dict[str, Any]:
        return {"role": "system", "content": f"You see images.\n{_script(*steps)}"}

    return [
        {
            "prompt_messages": [
                system(VISION_TOOLS, {"content": "blue"}),
                {"role": "user", "content": [{"type": "text", "text": "What colour is it?"}, _image(png_uri(64, 48))]},
            ],
            "answer": "blue",
            "level": {"grade": 3, "tags": ["colour", "vision"]},
        },
        {
            "prompt_messages": [system({"content": "red"}), {"role": "user", "content": [
                {"type": "text", "text": f"{XSS} and remote images"},
                _image(REMOTE), _image(JS_URL), _image(HTML_DATA),
            ]}],
            "answer": HOSTILE_FIELD,
        },
        {
            "prompt_messages": [system({"content": "green"}), {"role": "user", "content": [
                {"type": "text", "text": "a huge image"}, _image(OVERSIZED),
            ]}],
            "answer": "green",
        },
    ]  # fmt: skip


class VisionEnv(BaseEnv):
    """A geo3k-like env: ``zoom`` answers with an image part, ``lookup`` with a JSON object."""

    max_turns = 3

    async def create_dataset(self, split: str, base_dir: Path, *, max_examples: int | None = None) -> Any:
        return ListDataset(vision_rows())

    async def list_tools(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
            for name in ("zoom", "lookup")
        ]

    async def run_tool(self, rollout_id: str, tool_name: str, **kwargs: Any) -> Any:
        if tool_name == "zoom":
            return [{"type": "text", "text": "zoomed in"}, _image(png_uri(32, 16))]
        return {"city": kwargs.get("city"), "population": 2_100_000, "note": "line one\nline two"}

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        answer = rollout.messages[-1].get("content") or ""
        return {"correct": float(answer == rollout.example_args["answer"])}


def make_vision_run(root: Path) -> Path:
    """Evaluate :class:`VisionEnv` (group size 2) into ``root / "vision"``."""
    with ScriptedServer() as server:
        benchmax.evaluate(
            VisionEnv(), base_url=server.base_url, model="scripted", group_size=2, run_dir=root / "vision"
        )
    return root / "vision"


MIXTURE_ENVS = ("examples/math", "code<b>x</b>")
"""The envs of :func:`write_training_run`'s mixture: a name with a slash, one with markup."""


def write_training_run(
    run_dir: Path, steps: int = 3, *, group_size: int = 2, mixture: bool = False, curriculum: bool = False
) -> None:
    """A training run as ``benchmax train`` stores it: each step's groups (``step{N}/train/...``)
    and each step's metrics in the ``steps`` table; with ``mixture``, each step's per-env
    records (:class:`benchmax.train.EnvStep`) under ``"envs"`` as the trainer writes them;
    with ``curriculum``, the figures of ``--curriculum filter+levels`` (per env in a mixture)."""
    from benchmax.envs import RolloutOutcome, TurnRecord, Usage
    from benchmax.runner import RunSession
    from benchmax.store import GroupWrite
    from benchmax.train import EnvStep

    session = RunSession.create(run_dir, kind="train", meta={"model": "m", "env_class": "Env"})
    now = time.time()
    for step in range(steps):
        group_id = f"step{step}/train/ex{step % 2}"
        outcomes = tuple(
            RolloutOutcome(
                rewards={"correct": float((sample + step) % 2)},
                termination_reason="finished",
                rollout_id=f"{group_id}#{sample}",
                example_id=f"ex{step % 2}",
                messages=[
                    {"role": "user", "content": f"question of step {step}"},
                    {"role": "assistant", "content": f"answer {step}.{sample}"},
                ],
                turns=(TurnRecord(0, now, 0.01, 0.0, "stop", Usage(5, 3), policy_version=max(0, step - 1)),),
                started_at=now,
                ended_at=now + 0.01,
            )
            for sample in range(group_size)
        )
        session.writer.write_group(
            GroupWrite(
                group_id=group_id,
                example_id=f"ex{step % 2}",
                example_idx=step % 2,
                batch=step,
                step=step,
                outcomes=outcomes,
                sample_indices=tuple(range(group_size)),
                started_at=now,
                ended_at=now,
            )
        )
        session.record_step(
            step,
            {
                "reward": 0.5,
                "generated/correct": 0.25 * (step + 1),
                "groups/dead": 1.0,
                "groups/drawn": 3.0,
                "groups/dead_share": 1 / 3,
                "is_ratio/mean": 1.0,
                "is_ratio/min": 0.9,
                "is_ratio/max": 1.2,
                "kl/sampler": 0.001,
                "policy/staleness_max": 1.0 if step else 0.0,
                "step_time": 2.5,
                "mismatched_rollouts": [{"rollout_id": f"{group_id}#1", "detail": "turn 1"}] if step == 2 else [],
                **(
                    {
                        "envs": {
                            figures.env: figures.to_json()
                            for figures in (
                                EnvStep(MIXTURE_ENVS[0], 0.25 * step, {"exact": 0.25 * step}, 2, 2, 1, 0),
                                EnvStep(MIXTURE_ENVS[1], 0.75, {"tests_passed": 0.75}, 4, 4, 2, 1 + step % 2),
                            )
                        }
                    }
                    if mixture
                    else {}
                ),
                **(_curriculum_figures(step, mixture) if curriculum else {}),
            },
        )
    session.close_batches()
    session.close()


def _curriculum_figures(step: int, mixture: bool) -> dict[str, float]:
    """What a ``filter+levels`` curriculum logs after ``step``: examples set aside, levels."""
    figures = {"curriculum/set_aside": float(step + 2), "curriculum/skipped": 1.0, "curriculum/level": float(step // 2)}
    if mixture:
        for index, env in enumerate(MIXTURE_ENVS):
            figures[f"curriculum/{env}/set_aside"] = float(step + index)
            figures[f"curriculum/{env}/level"] = float(index * step)
    return figures
