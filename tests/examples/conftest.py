"""Loading shipped examples the way ``benchmax eval examples/NAME`` does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchmax.loading import EnvSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example_dir():
    """``example_dir(name)``: the directory of a shipped example."""

    def find(name: str) -> Path:
        path = EXAMPLES / name
        assert (path / "env.py").is_file(), f"{path} has no env.py"
        return path

    return find


@pytest.fixture
def load_example(example_dir):
    """``load_example(name)``: the env class in ``examples/NAME/env.py``, via the CLI's loader."""

    def load(name: str) -> type:
        return EnvSpec(str(example_dir(name))).load_class()

    return load


@pytest.fixture
def load_policy(example_dir):
    """``load_policy(name)``: ``solver`` from ``examples/NAME/policy.py``, a scripted model that solves the tasks."""

    def load(name: str):
        path = example_dir(name) / "policy.py"
        spec = importlib.util.spec_from_file_location(f"benchmax_example_policy_{name}", path)
        assert spec is not None and spec.loader is not None, f"cannot load {path}"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.solver

    return load
