"""Fixtures of the serve tests (the helpers live in ``serve_support``, importable by name from every test)."""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from serve_support import ServeProcess, write_rows

from benchmax.testing import ScriptedServer


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def serve_env(tmp_path: Path) -> Iterator[Any]:
    """``serve_env(rows, *args)``: a started :class:`ServeProcess` over ``rows``; stopped after the test."""
    started: list[ServeProcess] = []

    def start(rows: Sequence[dict[str, Any]], *args: str, env: dict[str, str] | None = None) -> ServeProcess:
        data = write_rows(tmp_path / f"served-data-{len(started)}", rows)
        server = ServeProcess(data, tmp_path / f"trace-{len(started)}", args=args, env=env)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop(signal.SIGKILL)
