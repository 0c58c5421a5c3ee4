"""Fixtures for the inspector tests: real runs, evaluated once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspector_runs import make_runs, make_vision_run


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with two finished runs, ``a`` and ``b``."""
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def vision_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one run, ``vision``: images in prompts and tool results, a tool error."""
    root = tmp_path_factory.mktemp("vision")
    make_vision_run(root)
    return root
