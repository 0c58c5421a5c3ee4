"""``benchmax validate`` and ``benchmax init``: checking an env, and starting a new one."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from benchmax.cli._options import DataDir, EnvArgs, EnvArgument, parse_env_args
from benchmax.cli._output import error_line
from benchmax.envs import EnvSpec
from benchmax.runner import validate_env

console = Console()


def validate_command(
    env: EnvArgument,
    env_arg: EnvArgs = [],  # noqa: B006
    data_dir: DataDir = None,
    max_examples: Annotated[int, typer.Option(help="Examples checked per split.")] = 5,
    base_url: Annotated[str | None, typer.Option(help="Also run one group against this endpoint.")] = None,
    model: Annotated[str, typer.Option()] = "default",
    api_key_env: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Check an env: it loads, both splits build, payloads and tool schemas are valid."""
    spec = EnvSpec(env, parse_env_args(env_arg))
    report = asyncio.run(
        validate_env(
            spec,
            data_dir=data_dir,
            max_examples=max_examples,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
        )
    )
    for note in report.notes:
        console.print(f"[green]ok[/] {escape(note)}", highlight=False, soft_wrap=True)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for problem in report.problems:
        console.print(error_line(f"{problem.where}: {problem.message}"), highlight=False, soft_wrap=True)
    if not report.ok:
        count = len(report.problems)
        console.print(f"{count} problem{'' if count == 1 else 's'} found")
        # As for eval: 2 when the env named cannot even be loaded, 1 when it has problems.
        raise typer.Exit(1 if report.loaded else 2)
    console.print("[bold green]valid[/]")


_ENV_TEMPLATE = '''"""{title}: a benchmax environment."""

from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from benchmax.rewards import extract_completion_text


class {cls}(BaseEnv):
    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        return JsonlDataset(base_dir / f"{{split}}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages).strip().lower()
        return {{"correct": float(answer == str(rollout.example_args["answer"]).lower())}}
'''

_TEST_TEMPLATE = '''"""Runs {cls} end to end against benchmax's scripted model server."""

import json
from pathlib import Path

import benchmax
from benchmax.testing import ScriptedServer

HERE = Path(__file__).parent


def test_a_right_answer_scores_one(tmp_path):
    with ScriptedServer(policy=lambda body: {{"content": "paris"}}) as server:
        result = benchmax.evaluate(
            str(HERE / "env.py"), base_url=server.base_url, model="scripted", run_dir=tmp_path / "run"
        )
    rows = [json.loads(line) for line in (HERE / "eval.jsonl").read_text().splitlines() if line.strip()]
    expected = sum(row["answer"] == "paris" for row in rows) / len(rows)
    assert result.stats.components["correct"].mean == expected
'''

_ROWS = {
    "train": [
        ("What is the capital of France? Answer in one word.", "paris"),
        ("What is the capital of Italy? Answer in one word.", "rome"),
        ("What is the capital of Spain? Answer in one word.", "madrid"),
    ],
    "eval": [
        ("What is the capital of France? Answer in one word.", "paris"),
        ("What is the capital of Japan? Answer in one word.", "tokyo"),
    ],
}


def init_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Directory (and env name) to create.")],
) -> None:
    """Scaffold a new env: env.py in the seed's shape, a tiny dataset, a test."""
    target = Path(name)
    if target.exists() and any(target.iterdir()):
        console.print(f"[red]error[/] {target} exists and is not empty; pick a new name")
        raise typer.Exit(1)
    stem = re.sub(r"[^0-9a-zA-Z]+", " ", target.name).title().replace(" ", "") or "My"
    cls = f"{stem}Env" if not stem[0].isdigit() else f"Env{stem}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "env.py").write_text(_ENV_TEMPLATE.format(title=target.name, cls=cls))
    (target / "test_env.py").write_text(_TEST_TEMPLATE.format(cls=cls))
    import json

    for split, rows in _ROWS.items():
        lines = [
            json.dumps({"prompt_messages": [{"role": "user", "content": question}], "answer": answer})
            for question, answer in rows
        ]
        (target / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    (target / "README.md").write_text(
        f"# {target.name}\n\nA benchmax environment (`{cls}` in `env.py`).\n\n"
        f"    benchmax validate {target}\n    benchmax eval {target} --max-examples 2\n"
        f"    pytest {target}\n"
    )
    console.print(f"created {target}/ with env.py, train.jsonl, eval.jsonl, test_env.py, README.md")
    console.print(f"next: benchmax validate {target}")
