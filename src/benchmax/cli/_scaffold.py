"""What ``benchmax init`` writes: a plain env directory, or an installable env package.

Both hold the same env (a one-turn quiz scored by exact match) and a test that
runs it against benchmax's scripted model server. The package adds a
pyproject.toml whose ``benchmax.envs`` entry point makes ``pip install -e``
register the env by name, ships the data files as package data, and its test
finds them through ``importlib.resources``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmax import __version__
from benchmax.cli._output import command_line

ROWS = {
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

_ENV = '''"""{title}: a benchmax environment."""

from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from benchmax.rewards import extract_completion_text


class {cls}(BaseEnv):
    """{description}"""

    max_turns = 1

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        # base_dir is this file's directory unless the run passes --data-dir.
        return JsonlDataset(base_dir / f"{{split}}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        answer = extract_completion_text(rollout.messages).strip().lower()
        return {{"correct": float(answer == str(rollout.example_args["answer"]).lower())}}
'''

_DIRECTORY_TEST = '''"""Runs {cls} end to end against benchmax's scripted model server."""

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

_PACKAGE_TEST = '''"""Runs the installed env {name!r} by name against benchmax's scripted model server.

Needs the package installed (pip install -e .): benchmax finds it through its entry point.
"""

import json
from importlib.resources import files

import benchmax
from benchmax.testing import ScriptedServer


def test_the_installed_env_runs_by_name_and_a_right_answer_scores_one(tmp_path):
    with ScriptedServer(policy=lambda body: {{"content": "paris"}}) as server:
        result = benchmax.evaluate(
            {name!r}, base_url=server.base_url, model="scripted", run_dir=tmp_path / "run"
        )
    data = files("{module}").joinpath("eval.jsonl").read_text()
    rows = [json.loads(line) for line in data.splitlines() if line.strip()]
    expected = sum(row["answer"] == "paris" for row in rows) / len(rows)
    assert result.verdict.ok
    assert result.stats.components["correct"].mean == expected
'''

_PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["benchmax>={benchmax}"]

[project.optional-dependencies]
test = ["pytest>=8"]

# What makes `benchmax eval {name}` find this env once the package is installed.
[project.entry-points."benchmax.envs"]
{name} = "{module}.env:{cls}"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
{module} = ["*.jsonl"]
"""

_PACKAGE_README = """# {dist}

{description} A benchmax env package: `{cls}` in `src/{module}/env.py`, its data
(`train.jsonl`, `eval.jsonl`) shipped beside it as package data.

    pip install -e {target}          # registers the env under the name {name!r}
    benchmax list                    # shows it, with its version
    benchmax validate {name}
    benchmax eval {name} --max-examples 2
    python -m pytest {target}/tests

Runs record the package name and version (and a hash of its source and data) in
their provenance. To publish it, build a wheel (`python -m build`) and upload it;
anyone who installs it runs it by name.
"""

_DIRECTORY_README = """# {title}

A benchmax environment (`{cls}` in `env.py`).

    benchmax validate {target}
    benchmax eval {target} --max-examples 2
    python -m pytest {target}

`python -m pytest` runs pytest with the python benchmax is installed in (the `local`
extra brings pytest); a `pytest` found first on PATH may belong to another python.
"""


@dataclass(frozen=True, slots=True)
class Names:
    """What one scaffold is called: its directory, env name, distribution, module and class."""

    target: Path
    name: str
    dist: str
    module: str
    cls: str

    @classmethod
    def of(cls, target: Path) -> Names:
        words = re.sub(r"[^0-9a-zA-Z]+", " ", target.name).split()
        stem = "".join(word[:1].upper() + word[1:] for word in words) or "My"
        class_name = f"{stem}Env" if not stem[0].isdigit() else f"Env{stem}"
        dist = "-".join(word.lower() for word in words) or "my-env"
        module = dist.replace("-", "_")
        if module[0].isdigit():
            module = f"env_{module}"
        return cls(target=target, name=dist, dist=dist, module=module, cls=class_name)


def test_command(target: Path | str) -> str:
    """``python -m pytest TARGET`` with the python this benchmax runs in, spelled as the shell finds it.

    A bare ``pytest`` may be another python's, which cannot import benchmax. The word
    ``python`` is used when the shell's ``python`` is this interpreter (an active venv),
    its full path otherwise. Without pytest installed, the command says how to get it.
    """
    found = shutil.which("python")
    same = found is not None and _same_file(found, sys.executable)
    python = "python" if same else sys.executable
    command = command_line(python, "-m", "pytest", target)
    if importlib.util.find_spec("pytest") is None:
        return f"{command_line(python, '-m', 'pip', 'install', 'pytest')} && {command}"
    return command


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def write_directory(names: Names) -> list[str]:
    """The plain scaffold: env.py, its data and a test in one directory."""
    target = names.target
    target.mkdir(parents=True, exist_ok=True)
    description = f"{target.name}: a one-turn quiz scored by exact match."
    (target / "env.py").write_text(_ENV.format(title=target.name, cls=names.cls, description=description))
    (target / "test_env.py").write_text(_DIRECTORY_TEST.format(cls=names.cls))
    _write_data(target)
    (target / "README.md").write_text(_DIRECTORY_README.format(title=target.name, cls=names.cls, target=target))
    return ["env.py", "train.jsonl", "eval.jsonl", "test_env.py", "README.md"]


def write_package(names: Names) -> list[str]:
    """The package scaffold: pyproject.toml with the entry point, src/MODULE, tests, README."""
    target = names.target
    package = target / "src" / names.module
    tests = target / "tests"
    package.mkdir(parents=True, exist_ok=True)
    tests.mkdir(parents=True, exist_ok=True)
    description = f"{names.name}: a one-turn quiz scored by exact match."
    minor = ".".join(__version__.split(".")[:2])
    (target / "pyproject.toml").write_text(
        _PYPROJECT.format(
            dist=names.dist, name=names.name, module=names.module, cls=names.cls, description=description,
            benchmax=minor,
        )
    )  # fmt: skip
    (package / "__init__.py").write_text(
        f'"""{description}"""\n\nfrom {names.module}.env import {names.cls}\n\n__all__ = ["{names.cls}"]\n'
    )
    (package / "env.py").write_text(_ENV.format(title=names.name, cls=names.cls, description=description))
    _write_data(package)
    (tests / f"test_{names.module}.py").write_text(_PACKAGE_TEST.format(name=names.name, module=names.module))
    (target / "README.md").write_text(
        _PACKAGE_README.format(
            dist=names.dist, name=names.name, module=names.module, cls=names.cls, description=description,
            target=target,
        )
    )  # fmt: skip
    return [
        "pyproject.toml",
        f"src/{names.module}/env.py",
        f"src/{names.module}/train.jsonl",
        f"src/{names.module}/eval.jsonl",
        f"tests/test_{names.module}.py",
        "README.md",
    ]


def _write_data(directory: Path) -> None:
    for split, rows in ROWS.items():
        lines = [
            json.dumps({"prompt_messages": [{"role": "user", "content": question}], "answer": answer})
            for question, answer in rows
        ]
        (directory / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
