"""Loading shipped examples the way ``benchmax eval examples/NAME`` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax.runner.env_spec import EnvSpec

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
