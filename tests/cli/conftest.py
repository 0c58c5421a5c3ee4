"""Fixtures: a scripted model server answering by each prompt's ``#answers`` line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))

from runkit import answers_policy

from benchmax.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(policy=answers_policy) as running:
        yield running
