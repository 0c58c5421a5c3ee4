"""Small envs written into the test's directory, each with its own data, for mixtures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))

from runkit import answers_policy

sys.path.insert(0, str(Path(__file__).parent))

from mixenvs import write_env

from benchmax.testing import ScriptedServer


@pytest.fixture
def envs(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, **options: object) -> Path:
        return write_env(tmp_path / "envs", name, **options)  # type: ignore[arg-type]

    return make


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy=answers_policy) as running:
        yield running
