"""The live line's mean per component is the summary table's: failed rollouts and conditional
components count as the zero-fill stores them, and a resumed run starts from what is stored."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console

import benchmax
from benchmax.cli._progress import LiveProgress
from benchmax.envs import BaseEnv, ListDataset
from benchmax.store import Run
from benchmax.testing import ScriptedServer

ROWS = [[{"content": "3"}], [{"status": 400, "message": "refused"}], [{"content": "4"}], [{"content": "3"}]]


class ScriptedEnv(BaseEnv):
    """``exact`` is conditional (only for the answer 3); the second example fails (model error)."""

    max_turns = 1

    async def create_dataset(self, split: str, base_dir: Path, *, max_examples: int | None = None) -> Any:
        prompts = [f"question {index}\n#script: {json.dumps(steps)}" for index, steps in enumerate(ROWS)]
        return ListDataset([{"prompt_messages": [{"role": "user", "content": text}]} for text in prompts])

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        answer = rollout.messages[-1].get("content") or ""
        rewards = {"correct": float(answer == "3"), "brevity": 0.5}
        if answer == "3":
            rewards["exact"] = 1.0
        return rewards


def _live_means(console_text: str) -> dict[str, str]:
    line = [text for text in console_text.splitlines() if text.strip().startswith("mean")][-1]
    return dict(re.findall(r"(\w+)=(\d+\.\d{3})", line))


def _table_means(run_dir: Path) -> dict[str, str]:
    with Run(run_dir) as run:
        return {name: f"{figures.mean:.3f}" for name, figures in run.stats(examples=0).components.items()}


def test_the_live_means_are_the_summary_tables_in_a_run_and_after_a_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with ScriptedServer() as server:
        out = io.StringIO()
        with LiveProgress(Console(file=out, width=200, force_terminal=False)) as progress:
            benchmax.evaluate(ScriptedEnv(), base_url=server.base_url, model="scripted", group_size=2,
                              run_dir=run_dir, observer=progress)  # fmt: skip
        table = _table_means(run_dir)
        assert table["correct"] == "0.500" and table["exact"] == "0.500", table  # the failed pair counted as 0
        assert _live_means(out.getvalue()) == table

        resumed = io.StringIO()
        with LiveProgress(Console(file=resumed, width=200, force_terminal=False)) as progress:
            benchmax.evaluate(ScriptedEnv(), base_url=server.base_url, model="scripted", group_size=2,
                              run_dir=run_dir, observer=progress, resume=True)  # fmt: skip
    assert "resuming: 8 of 8 rollouts already stored" in resumed.getvalue()
    assert _live_means(resumed.getvalue()) == _table_means(run_dir)


EXAMPLES = Path(__file__).parents[2] / "examples"


def test_a_mixtures_live_means_are_its_per_env_tables_one_line_per_env(tmp_path: Path) -> None:
    from runkit import run_cli

    with ScriptedServer() as server:  # echoes the prompt: format's brevity is neither 0 nor 1
        result = run_cli(
            "eval", EXAMPLES / "math", EXAMPLES / "format", EXAMPLES / "sql", "--max-examples", "2",
            "--group-size", "2", "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
            timeout=300,
        )  # fmt: skip

    assert result.returncode == 0, result.stdout
    live = {
        match[1]: dict(re.findall(r"(\w+)=(\d+\.\d{3})", match[2]))
        for match in re.finditer(r"^mean (\S+) +(.*)$", result.stdout, re.MULTILINE)
    }
    with Run(tmp_path / "run") as run:
        envs = run.stats().envs
    table = {str(env.env): {name: f"{mean:.3f}" for name, mean in env.components.items()} for env in envs}
    assert set(table) == {"math", "format", "sql"}
    assert live == table, result.stdout
    assert 0 < float(live["format"]["brevity"]) < 1, "a mean a division by the wrong count would change"
