"""A real OTLP/HTTP trace receiver on loopback, and the scripted model server, for the telemetry tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))
sys.path.insert(0, str(Path(__file__).parent))

from receiver import OtlpReceiver

from benchmax.testing import ScriptedServer


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running
