"""Fixtures: a scripted model server answering by each prompt's ``#answers`` line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "support"))

from runkit import answers_policy

from benchmax.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy=answers_policy) as running:
        yield running


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """One local Ray cluster for every Ray test of the session: Ray gives its node a fixed
    30 s to start, which a second cluster in the same process may miss on a loaded machine."""
    import logging

    import ray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()
